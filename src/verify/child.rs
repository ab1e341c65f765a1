//! `rcclfix verify-child` (hidden): the process that loads the NCCL-API library and the GPU runtime
//! and runs the cases, so a crash, abort or hang inside the library costs only this process.
//!
//! Two shapes: without `--rank` one process drives every GPU through `ncclCommInitAll` and group
//! calls; with `--rank R` it drives one GPU through `ncclCommInitRank` (rank 0 creates the
//! `ncclUniqueId` and reports it; the parent hands it to the other ranks), as PyTorch and vLLM do.
//! Results go to stdout as [`super::protocol`] lines.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::abi::{
    self, DeviceBuffer, Nccl, NcclComm, NcclError, NcclUniqueId, Runtime, RuntimeError, RuntimeKind,
};
use super::cases::{self, Case, Collective, DType, Placement};
use super::protocol::{self, Event, RankCheck};

/// What the hidden child process that loads the library does (its command line, set by
/// `rcclfix verify`, is `crate::cmd::verify::ChildArgs`).
#[derive(Debug, Clone)]
pub struct ChildOptions {
    /// The NCCL-API library.
    pub lib: PathBuf,
    /// GPU runtime flavour.
    pub runtime: RuntimeKind,
    /// Runtime library to load instead of searching.
    pub runtime_lib: Option<PathBuf>,
    /// Device indices, one per rank.
    pub gpus: Vec<i32>,
    /// Drive only this rank (`ncclCommInitRank`); without it, all ranks (`ncclCommInitAll`).
    pub rank: Option<usize>,
    /// Hex of the `ncclUniqueId` made by rank 0 (ranks ≥ 1).
    pub unique_id: Option<String>,
    /// Seconds each case may take on the GPU before it counts as hung.
    pub timeout: f64,
    /// Large size in bytes.
    pub large_bytes: usize,
    /// Timed iterations per case.
    pub iters: usize,
    /// Untimed warm-up iterations per case.
    pub warmup: usize,
    /// `CASE:INDEX`: flip one expected element (fault injection for the checker).
    pub inject_wrong_expectation: Option<String>,
    /// `CASE` or `init`: the last rank never joins that collective (or the communicator).
    pub inject_hang: Option<String>,
    /// Only load the runtime and report the device count.
    pub probe: bool,
}

/// Write one protocol line and flush (the parent's watchdog reads them as they come).
fn emit(ev: &Event) {
    crate::ui::protocol_line(&protocol::encode(ev));
}

/// After a hang the library cannot be shut down: wait for the parent to kill this process.
fn park() -> ! {
    std::thread::sleep(Duration::from_secs(120));
    std::process::abort()
}

/// Load the runtime: `--runtime-lib`, else the first candidate of [`super::locate::find_runtime`] that loads.
fn load_runtime(
    kind: RuntimeKind,
    explicit: Option<&PathBuf>,
    lib: &std::path::Path,
) -> anyhow::Result<Runtime> {
    if let Some(p) = explicit {
        return Ok(Runtime::load(kind, p)?);
    }
    let mut errs = Vec::new();
    for cand in super::locate::find_runtime(kind, lib) {
        match Runtime::load(kind, &cand) {
            Ok(rt) => return Ok(rt),
            Err(e) => errs.push(format!("{:#}", anyhow::Error::from(e))),
        }
    }
    anyhow::bail!(
        "no {} runtime library could be loaded:\n  {}\nhelp: pass --runtime-lib PATH",
        kind.as_str(),
        errs.join("\n  ")
    )
}

struct RankCtx {
    rank: usize,
    dev: i32,
    comm: NcclComm,
    stream: abi::Stream,
    start: abi::Event,
    stop: abi::Event,
    send: DeviceBuffer,
    recv: DeviceBuffer,
}

struct Child {
    args: ChildOptions,
    nranks: usize,
    rt: Option<Runtime>,
    nccl: Option<Nccl>,
    inputs: HashMap<(DType, usize, usize), Rc<Vec<u8>>>,
    expected: HashMap<(Collective, DType, usize), Rc<Vec<u8>>>,
    case: Option<usize>,
}

impl ChildOptions {
    /// Run the child; the exit code is 0 after `Done`, 2 after an `Error` event.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        let nranks = self.gpus.len();
        let mut child = Child {
            args: self,
            nranks,
            rt: None,
            nccl: None,
            inputs: HashMap::new(),
            expected: HashMap::new(),
            case: None,
        };
        match child.body() {
            Ok(()) => {
                emit(&Event::Done);
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                let nccl_result = e
                    .chain()
                    .find_map(|c| c.downcast_ref::<NcclError>())
                    .map(|n| n.result);
                let mut runtime_error = e
                    .chain()
                    .find_map(|c| c.downcast_ref::<RuntimeError>())
                    .map(|r| r.code);
                if runtime_error.is_none() {
                    if let Some(rt) = &child.rt {
                        let c = rt.last_error();
                        runtime_error = (c != 0).then_some(c);
                    }
                }
                let message = e
                    .chain()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(": ");
                emit(&Event::Error {
                    case: child.case,
                    message,
                    nccl_result,
                    runtime_error,
                });
                Ok(ExitCode::from(crate::EXIT_ERROR))
            }
        }
    }
}

impl Child {
    fn rt(&self) -> &Runtime {
        self.rt.as_ref().expect("runtime loaded")
    }
    fn nccl(&self) -> &Nccl {
        self.nccl.as_ref().expect("library loaded")
    }

    fn body(&mut self) -> anyhow::Result<()> {
        let a = self.args.clone();
        let rt = load_runtime(a.runtime, a.runtime_lib.as_ref(), &a.lib)?;
        let device_count = rt.device_count()?;
        let runtime_path = super::locate::mapped_file_at(rt.symbol_address())
            .unwrap_or_else(|| rt.path.display().to_string());
        self.rt = Some(rt);
        if a.probe {
            emit(&Event::Loaded {
                nccl_path: String::new(),
                nccl_version: 0,
                runtime_path,
                device_count,
                host_atomics: vec![],
                mapped: super::locate::mapped_collective_libs(),
            });
            return Ok(());
        }
        for &g in &a.gpus {
            if g < 0 || g >= device_count {
                anyhow::bail!(
                    "GPU {g} does not exist: the {} runtime sees {device_count} device(s)",
                    a.runtime.as_str()
                );
            }
        }
        let nccl = Nccl::load(&a.lib)?;
        let version = nccl.version()?;
        let nccl_path = super::locate::mapped_file_at(nccl.symbol_address())
            .unwrap_or_else(|| a.lib.display().to_string());
        self.nccl = Some(nccl);
        let local: Vec<usize> = match a.rank {
            Some(r) => vec![r],
            None => (0..self.nranks).collect(),
        };
        let host_atomics = local
            .iter()
            .map(|&r| self.rt().host_native_atomics(a.gpus[r]))
            .collect();
        emit(&Event::Loaded {
            nccl_path,
            nccl_version: version,
            runtime_path,
            device_count,
            host_atomics,
            mapped: super::locate::mapped_collective_libs(),
        });

        let case_list = cases::case_list(self.nranks, a.large_bytes)?;
        let inject_wrong = match &a.inject_wrong_expectation {
            Some(s) => {
                let (c, i) = s
                    .rsplit_once(':')
                    .context("--inject-wrong-expectation wants CASE:INDEX")?;
                let case =
                    cases::find_case(&case_list, c).with_context(|| format!("no case {c:?}"))?;
                Some((
                    case.id,
                    i.parse::<usize>()
                        .context("--inject-wrong-expectation INDEX")?,
                ))
            }
            None => None,
        };
        let inject_hang = a.inject_hang.as_deref();

        let t0 = Instant::now();
        let mut ranks = self.init(&local, inject_hang == Some("init"))?;
        let max_send = case_list.iter().map(|c| c.send_bytes()).max().unwrap_or(0);
        let max_recv = case_list
            .iter()
            .map(|c| c.recv_bytes(self.nranks))
            .max()
            .unwrap_or(0);
        for rc in &mut ranks {
            let rt = self.rt();
            rt.set_device(rc.dev)?;
            rc.stream = rt.stream_create()?;
            rc.start = rt.event_create()?;
            rc.stop = rt.event_create()?;
            rc.send = rt.malloc(max_send)?;
            rc.recv = rt.malloc(max_recv)?;
        }
        emit(&Event::InitDone {
            ms: t0.elapsed().as_secs_f64() * 1e3,
        });

        let mut host = vec![0u8; max_recv];
        for case in &case_list {
            self.case = Some(case.id);
            emit(&Event::CaseStart { case: case.id });
            let deadline = Instant::now() + Duration::from_secs_f64(a.timeout);
            let hang_here = inject_hang
                .is_some_and(|h| cases::find_case(&case_list, h).is_some_and(|c| c.id == case.id));
            let last = self.nranks - 1;
            if hang_here && a.rank == Some(last) {
                // The injected fault: this rank never joins the collective.
                park();
            }
            let launch: Vec<usize> = (0..ranks.len())
                .filter(|&i| !(hang_here && ranks[i].rank == last))
                .collect();

            for rc in &ranks {
                let input = self.input(case.dtype, rc.rank, case.send_count);
                let rt = self.rt();
                rt.set_device(rc.dev)?;
                rt.memset(rc.recv, cases::SENTINEL_BYTE, case.recv_bytes(self.nranks))?;
                let (send, _) = buffers(case, rc, self.nranks)?;
                rt.upload(send, &input)?;
            }
            self.launch(case, &ranks, &launch)?;
            if let Some(pending) = self.wait(&ranks, &launch, deadline)? {
                emit(&Event::Hang {
                    case: case.id,
                    waited_s: a.timeout,
                    pending,
                });
                park();
            }
            let mut checks = Vec::new();
            for rc in &ranks {
                let n = case.recv_bytes(self.nranks);
                self.rt().set_device(rc.dev)?;
                self.rt().download(&mut host[..n], rc.recv)?;
                let mut expected = self.expected(case);
                if let Some((cid, idx)) = inject_wrong {
                    if cid == case.id {
                        let mut e = (*expected).clone();
                        cases::corrupt_expected(case.dtype, &mut e, idx)?;
                        expected = Rc::new(e);
                    }
                }
                let mismatch = match case.coll {
                    Collective::AllReduce => cases::check(case.dtype, &expected, &host[..n]),
                    Collective::AllGather => cases::check_all_gather(
                        case.dtype,
                        self.nranks,
                        case.send_count,
                        &expected,
                        &host[..n],
                    ),
                };
                checks.push(RankCheck {
                    rank: rc.rank,
                    mismatch,
                });
            }

            // Timing, nccl-tests style: warm-up, then `iters` back-to-back collectives between events.
            for _ in 0..a.warmup {
                self.launch(case, &ranks, &launch)?;
            }
            for rc in &ranks {
                self.rt().set_device(rc.dev)?;
                self.rt().event_record(rc.start, rc.stream)?;
            }
            for _ in 0..a.iters {
                self.launch(case, &ranks, &launch)?;
            }
            for rc in &ranks {
                self.rt().set_device(rc.dev)?;
                self.rt().event_record(rc.stop, rc.stream)?;
            }
            if let Some(pending) = self.wait(&ranks, &launch, deadline)? {
                emit(&Event::Hang {
                    case: case.id,
                    waited_s: a.timeout,
                    pending,
                });
                park();
            }
            let mut time_us: f64 = 0.0;
            for rc in &ranks {
                let ms = self.rt().elapsed_ms(rc.start, rc.stop)? as f64;
                time_us = time_us.max(ms * 1e3 / a.iters.max(1) as f64);
            }
            emit(&Event::CaseDone {
                case: case.id,
                time_us,
                checks,
            });
        }
        self.case = None;

        for rc in &ranks {
            let rt = self.rt();
            rt.set_device(rc.dev)?;
            rt.stream_synchronize(rc.stream)?;
            self.nccl().comm_destroy(rc.comm)?;
            rt.free(rc.send)?;
            rt.free(rc.recv)?;
        }
        Ok(())
    }

    /// Create the communicator(s): `ncclCommInitAll` for all ranks, or `ncclCommInitRank` for one.
    fn init(&self, local: &[usize], hang_init: bool) -> anyhow::Result<Vec<RankCtx>> {
        let a = &self.args;
        let nccl = self.nccl();
        let comms: Vec<NcclComm> = match a.rank {
            None => {
                if hang_init {
                    anyhow::bail!("--inject-hang init needs one process per rank (--mode multi)");
                }
                nccl.comm_init_all(&a.gpus[..self.nranks])
                    .map_err(|e| self.with_rt_error(e))?
            }
            Some(rank) => {
                self.rt().set_device(a.gpus[rank])?;
                let uid = match &a.unique_id {
                    Some(hex) => parse_unique_id(hex)?,
                    None => {
                        if rank != 0 {
                            anyhow::bail!("rank {rank} needs --unique-id");
                        }
                        let uid = nccl.unique_id()?;
                        emit(&Event::UniqueId {
                            hex: hex::encode(uid.internal),
                        });
                        uid
                    }
                };
                if hang_init && rank == self.nranks - 1 {
                    // The injected fault: the last rank never joins the communicator.
                    park();
                }
                vec![nccl
                    .comm_init_rank(self.nranks, uid, rank)
                    .map_err(|e| self.with_rt_error(e))?]
            }
        };
        Ok(local
            .iter()
            .zip(comms)
            .map(|(&rank, comm)| RankCtx {
                rank,
                dev: a.gpus[rank],
                comm,
                stream: std::ptr::null_mut(),
                start: std::ptr::null_mut(),
                stop: std::ptr::null_mut(),
                send: DeviceBuffer::null(),
                recv: DeviceBuffer::null(),
            })
            .collect())
    }

    /// Attach the runtime's last error (what the library's own runtime call returned, when it
    /// shares our runtime) to an NCCL error.
    fn with_rt_error(&self, e: NcclError) -> anyhow::Error {
        let code = self.rt().last_error();
        if code != 0 {
            let err = self.rt().error("the runtime's last error".into(), code);
            return anyhow::Error::new(err).context(e.to_string());
        }
        e.into()
    }

    /// Issue the case's collective on the ranks in `which` (a group when more than one).
    fn launch(&self, case: &Case, ranks: &[RankCtx], which: &[usize]) -> anyhow::Result<()> {
        let nccl = self.nccl();
        let grouped = which.len() > 1;
        if grouped {
            nccl.group_start()?;
        }
        for &i in which {
            let rc = &ranks[i];
            self.rt().set_device(rc.dev)?;
            let (send, recv) = buffers(case, rc, self.nranks)?;
            let dt = case.dtype.nccl();
            match case.coll {
                Collective::AllReduce => nccl.all_reduce(
                    send,
                    recv,
                    case.send_count,
                    dt,
                    abi::NCCL_SUM,
                    rc.comm,
                    rc.stream,
                ),
                Collective::AllGather => nccl.all_gather(
                    send,
                    recv,
                    case.send_count,
                    dt,
                    self.nranks,
                    rc.comm,
                    rc.stream,
                ),
            }
            .map_err(|e| self.with_rt_error(e))?;
        }
        if grouped {
            nccl.group_end().map_err(|e| self.with_rt_error(e))?;
        }
        Ok(())
    }

    /// Poll `StreamQuery` on the launched ranks' streams until all are idle (`Ok(None)`) or the
    /// deadline passes (`Ok(Some(ranks))`: a hang, with the ranks whose collective never finished).
    fn wait(
        &self,
        ranks: &[RankCtx],
        which: &[usize],
        deadline: Instant,
    ) -> anyhow::Result<Option<Vec<usize>>> {
        let mut nap = Duration::from_micros(20);
        loop {
            let mut pending = Vec::new();
            for &i in which {
                if !self.rt().stream_done(ranks[i].stream)? {
                    pending.push(ranks[i].rank);
                }
            }
            if pending.is_empty() {
                return Ok(None);
            }
            if Instant::now() >= deadline {
                return Ok(Some(pending));
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(2));
        }
    }

    fn input(&mut self, dtype: DType, rank: usize, count: usize) -> Rc<Vec<u8>> {
        self.inputs
            .entry((dtype, rank, count))
            .or_insert_with(|| Rc::new(cases::input_bytes(dtype, rank, count)))
            .clone()
    }

    fn expected(&mut self, case: &Case) -> Rc<Vec<u8>> {
        let key = (case.coll, case.dtype, case.send_count);
        if let Some(e) = self.expected.get(&key) {
            return e.clone();
        }
        let n = self.nranks;
        let e = Rc::new(match case.coll {
            Collective::AllReduce => cases::all_reduce_expected(case.dtype, n, case.send_count),
            // Rank `s`'s input in slot `s`: the same construction as `cases::all_gather_expected`,
            // from the inputs already made for the upload.
            Collective::AllGather => {
                let mut v = Vec::with_capacity(case.recv_bytes(n));
                for s in 0..n {
                    v.extend_from_slice(&self.input(case.dtype, s, case.send_count));
                }
                v
            }
        });
        self.expected.insert(key, e.clone());
        e
    }
}

/// The (send, receive) device buffers of a case on one rank, each cut to the case's size: in-place
/// all_reduce sends from the receive buffer, in-place all_gather from the rank's own slot of it.
///
/// Errors: the allocations are smaller than the case (they are sized for the largest case).
fn buffers(
    case: &Case,
    rc: &RankCtx,
    nranks: usize,
) -> anyhow::Result<(DeviceBuffer, DeviceBuffer)> {
    let send_bytes = case.send_bytes();
    let recv = rc
        .recv
        .slice(0, case.recv_bytes(nranks))
        .context("the receive buffer is smaller than the case")?;
    let send = match (case.placement, case.coll) {
        (Placement::OutOfPlace, _) => rc.send.slice(0, send_bytes),
        (Placement::InPlace, Collective::AllReduce) => recv.slice(0, send_bytes),
        (Placement::InPlace, Collective::AllGather) => recv.slice(rc.rank * send_bytes, send_bytes),
    }
    .context("the send buffer is smaller than the case")?;
    Ok((send, recv))
}

/// Parse the 256 hex digits of an `ncclUniqueId`.
pub fn parse_unique_id(hex_text: &str) -> anyhow::Result<NcclUniqueId> {
    let bytes = hex::decode(hex_text.trim()).context("--unique-id is not hex")?;
    let internal: [u8; 128] = bytes
        .try_into()
        .map_err(|b: Vec<u8>| anyhow::anyhow!("--unique-id has {} bytes, want 128", b.len()))?;
    Ok(NcclUniqueId { internal })
}
