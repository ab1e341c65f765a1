//! `verify` without a GPU: the child protocol, the diagnosis, the report's verdict, the command
//! line's error paths, and whole runs (one process, and one process per rank) on a stand-in
//! library with planted faults. The arithmetic (binary16/bfloat16 rounding, inputs, expected
//! values, the checker, algbw/busbw) is in `verify_checker.rs`.

use std::process::Command;

use rcclfix::verify::abi::{self, RuntimeKind};
use rcclfix::verify::cases;
use rcclfix::verify::diagnose::{self, Failure};
use rcclfix::verify::locate;
use rcclfix::verify::protocol::{self, Event, RankCheck};
use rcclfix::verify::report::{CaseReport, CaseStatus, Mode, Report, Verdict};

// ---------------------------------------------------------------- report, protocol, diagnosis

fn report_with(statuses: &[CaseStatus]) -> Report {
    let list = cases::case_list(2, 1 << 20).unwrap();
    let mut cases: Vec<CaseReport> = list
        .iter()
        .take(statuses.len())
        .map(|c| CaseReport::new(c, 2))
        .collect();
    for (c, s) in cases.iter_mut().zip(statuses) {
        c.status = *s;
    }
    Report {
        library: "libnccl.so.2".into(),
        loaded: Some("/x/libnccl.so.2".into()),
        nccl_version: Some("2.28.9".into()),
        runtime: RuntimeKind::Cuda,
        runtime_path: Some("/x/libcudart.so.13".into()),
        mapped: vec![],
        mode: Mode::Single,
        gpus: vec![0, 1],
        nranks: 2,
        host_atomics: vec![Some(true), Some(true)],
        init_ms: Some(700.0),
        total_s: 5.0,
        cases,
        errors: vec![],
        diagnosis: vec![],
        verdict: Verdict::Error,
    }
}

#[test]
fn verdict_and_exit_code() {
    let check = |st: &[CaseStatus], v: Verdict, code: u8| {
        let mut r = report_with(st);
        r.settle();
        assert_eq!((r.verdict, r.exit_code()), (v, code), "{st:?}");
    };
    check(&[CaseStatus::Ok, CaseStatus::Ok], Verdict::Pass, 0);
    check(&[CaseStatus::Ok, CaseStatus::Wrong], Verdict::Fail, 1);
    check(&[CaseStatus::Hung, CaseStatus::NotRun], Verdict::Fail, 1);
    check(&[CaseStatus::Error, CaseStatus::NotRun], Verdict::Error, 2);
    check(&[CaseStatus::Ok, CaseStatus::NotRun], Verdict::Error, 2);
    check(&[], Verdict::Error, 2);
    let mut r = report_with(&[CaseStatus::Ok]);
    r.errors.push("boom".into());
    r.settle();
    assert_eq!(r.exit_code(), 2);
}

#[test]
fn table_names_the_wrong_case_rank_and_index() {
    let list = cases::case_list(2, 1 << 20).unwrap();
    let mut r = report_with(&[]);
    let c = cases::find_case(&list, "all_reduce-bf16-small-in").unwrap();
    let mut e = cases::all_reduce_expected(c.dtype, 2, c.send_count);
    let got = e.clone();
    cases::corrupt_expected(c.dtype, &mut e, 42).unwrap();
    let mut row = CaseReport::new(c, 2);
    row.finish(
        2,
        12.5,
        vec![RankCheck {
            rank: 1,
            mismatch: cases::check(c.dtype, &e, &got),
        }],
    );
    r.cases.push(row);
    r.settle();
    let text = r.render();
    assert!(text.contains("# WRONG all_reduce-bf16-small-in (case 9): rank 1, first wrong index 42 of 3001: expected"), "{text}");
    assert!(text.contains("verdict: FAIL"), "{text}");
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["cases"][0]["failures"][0]["mismatch"]["index"], 42);
    assert_eq!(json["verdict"], "fail");
}

#[test]
fn protocol_lines_round_trip_and_log_lines_pass_through() {
    let ev = Event::CaseDone {
        case: 3,
        time_us: 12.5,
        checks: vec![RankCheck {
            rank: 0,
            mismatch: None,
        }],
    };
    let line = protocol::encode(&ev);
    assert!(line.starts_with(protocol::MARKER));
    assert_eq!(protocol::decode(&line).unwrap(), Some(ev));
    assert_eq!(
        protocol::decode("host:1234:1234 [0] NCCL INFO Bootstrap").unwrap(),
        None
    );
    assert!(protocol::decode(&format!("{}{{\"event\":\"nope\"}}", protocol::MARKER)).is_err());
}

#[test]
fn unique_id_hex_is_checked() {
    use rcclfix::verify::child::parse_unique_id;
    let id = parse_unique_id(&"ab".repeat(128)).unwrap();
    assert!(id.internal.iter().all(|&b| b == 0xab));
    assert!(parse_unique_id("abcd").is_err());
    assert!(parse_unique_id(&"zz".repeat(128)).is_err());
}

#[test]
fn hostcall_refusal_is_explained() {
    let f = Failure {
        nccl_result: Some(1),
        runtime_error: Some(401),
        message: "ncclAllReduce failed: ncclUnhandledCudaError (1) 'unhandled cuda error'",
        log: "enqueue.cc:2061 NCCL WARN HIP failure 'the operation cannot be performed in the present state'",
        host_atomics: &[Some(false), Some(false)],
        signal: None,
    };
    let d = diagnose::diagnose(RuntimeKind::Hip, &f, "/opt/rocm/lib/librccl.so.1").join("\n");
    assert!(d.contains("hipErrorIllegalState"), "{d}");
    assert!(d.contains("hidden_hostcall_buffer"), "{d}");
    assert!(d.contains("hostNativeAtomicSupported = 0"), "{d}");
    assert!(d.contains("rcclfix scan /opt/rocm/lib/librccl.so.1"), "{d}");
}

#[test]
fn hostcall_refusal_is_recognised_from_the_log_alone() {
    let f = Failure {
        nccl_result: Some(1),
        log: "NCCL WARN HIP failure 'the operation cannot be performed in the present state'",
        ..Default::default()
    };
    let d = diagnose::diagnose(RuntimeKind::Hip, &f, "librccl.so.1").join("\n");
    assert!(d.contains("rcclfix scan librccl.so.1"), "{d}");
}

#[test]
fn other_failures_get_their_own_notes() {
    let unhandled = Failure {
        nccl_result: Some(1),
        ..Default::default()
    };
    let d = diagnose::diagnose(RuntimeKind::Cuda, &unhandled, "libnccl.so.2").join("\n");
    assert!(
        d.contains("unhandled cuda error") && d.contains("NCCL_DEBUG=INFO"),
        "{d}"
    );
    assert!(!d.contains("hostcall"), "{d}");
    let no_image = Failure {
        log: "hipErrorNoBinaryForGpu: no binary for gpu",
        ..Default::default()
    };
    let d = diagnose::diagnose(RuntimeKind::Hip, &no_image, "librccl.so.1").join("\n");
    assert!(d.contains("no code object for this GPU"), "{d}");
    let crash = Failure {
        signal: Some(6),
        ..Default::default()
    };
    assert!(diagnose::diagnose(RuntimeKind::Hip, &crash, "x")
        .join("\n")
        .contains("SIGABRT"));
    assert_eq!(
        abi::runtime_error_name(RuntimeKind::Hip, 401),
        "hipErrorIllegalState"
    );
    assert_eq!(
        abi::runtime_error_name(RuntimeKind::Cuda, 600),
        "cudaErrorNotReady"
    );
}

#[test]
fn maps_lookup_finds_the_library_holding_an_address() {
    let maps = "\
7f0000000000-7f0000100000 r-xp 00000000 08:01 1234 /opt/rocm/lib/librccl.so.1.0
7f0000100000-7f0000200000 r--p 00100000 08:01 1234 /opt/rocm/lib/librccl.so.1.0
7f0000300000-7f0000301000 rw-p 00000000 00:00 0
7f0000400000-7f0000500000 r-xp 00000000 08:01 99 /usr/lib/with space/libamdhip64.so.6
";
    assert_eq!(
        locate::parse_maps_for(maps, 0x7f00000abcde).as_deref(),
        Some("/opt/rocm/lib/librccl.so.1.0")
    );
    assert_eq!(locate::parse_maps_for(maps, 0x7f0000300010), None);
    assert_eq!(
        locate::parse_maps_for(maps, 0x7f0000400001).as_deref(),
        Some("/usr/lib/with space/libamdhip64.so.6")
    );
    assert_eq!(locate::parse_maps_for(maps, 0x1000), None);
    assert_eq!(abi::format_nccl_version(22809), "2.28.9");
    assert_eq!(abi::format_nccl_version(2708), "2.7.8");
    assert_eq!(
        locate::guess_runtime("/opt/rocm/lib/librccl.so.1".as_ref()),
        RuntimeKind::Hip
    );
    assert_eq!(
        locate::guess_runtime("/x/libnccl.so.2".as_ref()),
        RuntimeKind::Cuda
    );
}

// ---------------------------------------------------------------- command line

fn rcclfix(args: &[&str]) -> (i32, String, String) {
    let out = crate::support::rcclfix().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn missing_library_is_one_clear_error() {
    let (code, out, err) = rcclfix(&["verify", "--lib", "/nonexistent/librccl.so.1"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(
        err.starts_with("error: /nonexistent/librccl.so.1: no such file"),
        "{err}"
    );
}

#[test]
fn one_gpu_is_a_usage_error() {
    let lib = std::env::current_exe().unwrap();
    let (code, _, err) = rcclfix(&["verify", "--lib", lib.to_str().unwrap(), "--gpus", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("verify needs 2 to 8"), "{err}");
    let (code, _, err) = rcclfix(&[
        "verify",
        "--lib",
        lib.to_str().unwrap(),
        "--inject-hang",
        "nope",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("no case \"nope\""), "{err}");
}

#[test]
fn a_library_without_the_nccl_api_is_reported_by_the_child() {
    // Any shared object that is not an NCCL-API library: the runtime loads (we point it at the C
    // library, which lacks the runtime symbols) and the child reports which symbol is missing.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let libc = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            p.rsplit('/')
                .next()
                .is_some_and(|n| n.starts_with("libc.so") || n.starts_with("libc-"))
        })
        .expect("this test process maps a C library");
    let (code, out, _) = rcclfix(&[
        "verify",
        "--lib",
        libc,
        "--runtime",
        "cuda",
        "--runtime-lib",
        libc,
        "--json",
    ]);
    assert_eq!(code, 2);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["verdict"], "error");
    let err = json["errors"][0].as_str().unwrap();
    assert!(err.contains("does not export cudaSetDevice"), "{err}");
}

// ---------------------------------------------------------------- end to end on a stand-in library
//
// `tests/data/verify/fakenccl.c` is a host-memory stand-in for an NCCL-API library plus the HIP
// runtime (our own C, no NCCL or HIP code). With it the real parent, child, protocol, watchdog,
// checks and diagnosis run without a GPU; FAKENCCL_FAULT picks the fault.

pub(crate) fn fake_lib() -> std::path::PathBuf {
    static LIB: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("verify-fake");
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("libfakenccl.so");
        let src =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/verify/fakenccl.c");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let status = Command::new(&cc)
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .unwrap_or_else(|e| {
                panic!("cannot run the C compiler `{cc}` (package gcc, .ci/apt.d/verify.txt): {e}")
            });
        assert!(status.success(), "compiling {} failed", src.display());
        out
    })
    .clone()
}

/// Run `rcclfix verify --json` on the stand-in with `fault` and extra arguments; (exit code, report).
fn fake_verify(fault: Option<&str>, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let lib = fake_lib();
    let mut cmd = crate::support::rcclfix();
    cmd.args([
        "verify",
        "--json",
        "--runtime",
        "hip",
        "--large-bytes",
        "65536",
        "--iters",
        "2",
        "--lib",
    ])
    .arg(&lib)
    .arg("--runtime-lib")
    .arg(&lib)
    .args(extra);
    match fault {
        Some(f) => cmd.env("FAKENCCL_FAULT", f),
        None => cmd.env_remove("FAKENCCL_FAULT"),
    };
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    (out.status.code().unwrap_or(-1), json, stderr)
}

fn statuses(json: &serde_json::Value) -> Vec<String> {
    json["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn fake_correct_library_passes_every_case() {
    let (code, json, err) = fake_verify(None, &[]);
    assert_eq!(code, 0, "{err}\n{json:#}");
    assert!(statuses(&json).iter().all(|s| s == "ok"));
    assert_eq!(json["cases"].as_array().unwrap().len(), 24);
    assert_eq!(json["nccl_version"], "2.28.9");
    assert!(json["loaded"].as_str().unwrap().ends_with("libfakenccl.so"));
    assert_eq!(json["host_atomics"], serde_json::json!([true, true]));
}

#[test]
fn fake_rank0_data_in_every_all_gather_slot_fails() {
    let (code, json, _) = fake_verify(Some("rank0-everywhere"), &[]);
    assert_eq!(code, 1);
    for c in json["cases"].as_array().unwrap() {
        let ag = c["coll"] == "all_gather";
        assert_eq!(
            c["status"],
            if ag { "wrong" } else { "ok" },
            "{}",
            c["name"]
        );
        if ag {
            let m = &c["failures"][0]["mismatch"];
            assert_eq!(m["slot"], 1);
            assert_eq!(m["note"], "slot 1 holds rank 0's data");
        }
    }
}

#[test]
fn fake_wrong_element_is_reported_with_rank_and_index() {
    let (code, json, _) = fake_verify(Some("flip:77"), &[]);
    assert_eq!(code, 1);
    let c = &json["cases"][0];
    assert_eq!(c["status"], "wrong");
    assert_eq!(c["wrong"], 1);
    assert_eq!(c["failures"][0]["rank"], 1);
    assert_eq!(c["failures"][0]["mismatch"]["index"], 77);
}

#[test]
fn fake_injected_wrong_expectation_names_the_index() {
    let (code, json, _) = fake_verify(
        None,
        &[
            "--inject-wrong-expectation",
            "all_gather-bf16-large-in:20000",
        ],
    );
    assert_eq!(code, 1);
    let c = &json["cases"][23];
    assert_eq!(c["name"], "all_gather-bf16-large-in");
    assert_eq!(c["failures"][0]["mismatch"]["index"], 20000);
    assert_eq!(c["failures"][1]["mismatch"]["index"], 20000);
    assert_eq!(statuses(&json).iter().filter(|s| *s == "wrong").count(), 1);
}

#[test]
fn fake_hang_times_out_names_the_case_and_stops() {
    // Each case issues 1 + 1 warm-up + 2 timed collectives on 2 ranks: call 16 is case 2's first.
    let t = std::time::Instant::now();
    let (code, json, _) = fake_verify(Some("hang:16"), &["--timeout", "1"]);
    assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
    assert_eq!(code, 1);
    let st = statuses(&json);
    assert_eq!(&st[..3], ["ok", "ok", "hung"]);
    assert!(st[3..].iter().all(|s| s == "not-run"));
    assert!(json["cases"][2]["message"]
        .as_str()
        .unwrap()
        .contains("rank 0,1 still waiting after 1 s"));
}

#[test]
fn fake_rank_that_never_joins_is_a_hang_of_that_case() {
    let (code, json, _) = fake_verify(
        None,
        &[
            "--inject-hang",
            "all_gather-f16-small-out",
            "--timeout",
            "1",
        ],
    );
    assert_eq!(code, 1);
    let c = &json["cases"][16];
    assert_eq!(
        (c["name"].as_str(), c["status"].as_str()),
        (Some("all_gather-f16-small-out"), Some("hung"))
    );
    assert_eq!(statuses(&json).iter().filter(|s| *s == "ok").count(), 16);
    assert!(
        c["message"].as_str().unwrap().starts_with(
            "rank 0 still waiting after 1 s (rank 1 did not join or already finished)"
        ),
        "{c}"
    );
}

#[test]
fn fake_abort_is_an_error_of_the_case() {
    let (code, json, _) = fake_verify(Some("abort:4"), &[]);
    assert_eq!(code, 2);
    let c = &json["cases"][0];
    assert_eq!(c["status"], "error");
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("died from signal 6 (SIGABRT)"),
        "{c}"
    );
    assert!(json["diagnosis"].to_string().contains("SIGABRT"));
}

#[test]
fn fake_hostcall_refusal_is_diagnosed() {
    let (code, json, err) = fake_verify(Some("hostcall"), &[]);
    assert_eq!(code, 2);
    assert_eq!(json["cases"][0]["status"], "error");
    assert!(json["cases"][0]["message"]
        .as_str()
        .unwrap()
        .contains("ncclUnhandledCudaError"));
    assert_eq!(json["host_atomics"], serde_json::json!([false, false]));
    let d = json["diagnosis"].to_string();
    assert!(
        d.contains("hipErrorIllegalState")
            && d.contains("hidden_hostcall_buffer")
            && d.contains("rcclfix scan"),
        "{d}"
    );
    // The library's own WARN line reaches stderr, tagged with the process it came from.
    assert!(
        err.contains("[child] fake:1:1 [0] enqueue.cc:2061 NCCL WARN HIP failure"),
        "{err}"
    );
}

/// The stand-in laid out like an RCCL install: `librccl.so.1` with `libamdhip64.so` beside it (both
/// links to one file, so the loader maps it once), found by the default runtime search.
fn fake_rccl_install() -> std::path::PathBuf {
    // Made once per test process: tests run in parallel, and two of them replacing the same links
    // raced (EEXIST).
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let fake = fake_lib();
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("verify-fake-rccl");
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["librccl.so.1", "libamdhip64.so"] {
            let link = dir.join(name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&fake, &link).unwrap();
        }
        dir
    });
    dir.join("librccl.so.1")
}

fn small_args(lib: &std::path::Path) -> rcclfix::verify::Options {
    let mut args = rcclfix::verify::Options::for_library(lib);
    args.large_bytes = 65536;
    args.iters = 2;
    args
}

#[test]
fn build_entry_point_runs_the_suite_on_two_gpus() {
    let lib = fake_rccl_install();
    let exe = std::path::Path::new(crate::support::BIN);
    let (json, pass) = rcclfix::verify::verify_for_build_with(exe, &small_args(&lib))
        .unwrap()
        .expect("2 GPUs seen");
    assert!(pass, "{json:#}");
    assert_eq!(json["runtime"], "hip");
    assert_eq!(json["verdict"], "pass");
    assert!(
        json["runtime_path"]
            .as_str()
            .unwrap()
            .ends_with("libfakenccl.so"),
        "{}",
        json["runtime_path"]
    );
}

#[test]
fn build_entry_point_skips_without_enough_gpus_or_a_runtime() {
    let lib = fake_rccl_install();
    let exe = std::path::Path::new(crate::support::BIN);
    let mut three = small_args(&lib);
    three.gpus = vec![0, 1, 2];
    assert!(rcclfix::verify::verify_for_build_with(exe, &three)
        .unwrap()
        .is_none());
    let mut no_runtime = small_args(&lib);
    no_runtime.runtime_lib = Some("/nonexistent/libamdhip64.so".into());
    assert!(rcclfix::verify::verify_for_build_with(exe, &no_runtime)
        .unwrap()
        .is_none());
}

// One process per rank on the stand-in: the unique id names a shared file, collectives complete in
// hipStreamQuery once every rank has deposited its data.

fn multi(extra: &[&str]) -> Vec<String> {
    let mut v = vec!["--mode".to_owned(), "multi".to_owned()];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn fake_multi(fault: Option<&str>, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let args = multi(extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    fake_verify(fault, &args)
}

#[test]
fn fake_multi_process_run_passes_every_case() {
    let (code, json, err) = fake_multi(None, &[]);
    assert_eq!(code, 0, "{err}\n{json:#}");
    assert_eq!(json["mode"], "multi");
    assert!(statuses(&json).iter().all(|s| s == "ok"));
    assert_eq!(json["host_atomics"], serde_json::json!([true, true]));
}

#[test]
fn fake_multi_process_wrong_data_is_found_on_each_rank() {
    let (code, json, _) = fake_multi(Some("rank0-everywhere"), &[]);
    assert_eq!(code, 1);
    let ag = &json["cases"][12];
    assert_eq!(ag["name"], "all_gather-f32-small-out");
    let ranks: Vec<i64> = ag["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rank"].as_i64().unwrap())
        .collect();
    assert_eq!(ranks, [0, 1]);
    assert_eq!(
        ag["failures"][1]["mismatch"]["note"],
        "slot 1 holds rank 0's data"
    );
    let (code, json, _) = fake_multi(Some("flip:77"), &[]);
    assert_eq!(code, 1);
    assert_eq!(json["cases"][0]["failures"][0]["rank"], 1);
    assert_eq!(json["cases"][0]["failures"][0]["mismatch"]["index"], 77);
}

#[test]
fn fake_multi_process_rank_that_never_joins_a_collective_is_a_hang() {
    let (code, json, _) = fake_multi(
        None,
        &["--inject-hang", "all_reduce-f16-large-in", "--timeout", "1"],
    );
    assert_eq!(code, 1);
    let c = &json["cases"][7];
    assert_eq!(
        (c["name"].as_str(), c["status"].as_str()),
        (Some("all_reduce-f16-large-in"), Some("hung"))
    );
    assert_eq!(
        c["message"],
        "rank 0 still waiting after 1 s; the library processes were killed"
    );
    assert!(statuses(&json)[8..].iter().all(|s| s == "not-run"));
}

#[test]
fn fake_multi_process_rank_that_never_joins_the_communicator_times_out() {
    let t = std::time::Instant::now();
    let (code, json, _) = fake_multi(None, &["--inject-hang", "init", "--init-timeout", "2"]);
    assert!(t.elapsed().as_secs() < 20);
    assert_eq!(code, 2);
    assert!(
        json["errors"][0]
            .as_str()
            .unwrap()
            .contains("did not finish within 2 s"),
        "{json:#}"
    );
    assert!(statuses(&json).iter().all(|s| s == "not-run"));
    // Rank 0 was killed before every rank joined, so its shared file is still there: remove the
    // files of stand-in processes that no longer exist (`fakenccl-<pid>-<time>`).
    for e in std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix("fakenccl-")
            .and_then(|r| r.split('-').next());
        if pid.is_some_and(|p| !std::path::Path::new("/proc").join(p).exists()) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[test]
fn fake_multi_process_crash_is_an_error_of_the_case() {
    // The 6th collective call aborts; how many calls a case makes (warm-up and timed
    // iterations) can depend on timing, so the crash may land in the first or second case.
    // Whichever it is must be an error naming the signal, and every later case "not run".
    let (code, json, _) = fake_multi(Some("abort:6"), &[]);
    assert_eq!(code, 2);
    let st = statuses(&json);
    let i = st
        .iter()
        .position(|s| s == "error")
        .unwrap_or_else(|| panic!("no case is an error: {json:#}"));
    assert!(i <= 1, "the crash came late: {json:#}");
    assert!(st[..i].iter().all(|s| s == "ok"), "{json:#}");
    assert!(st[i + 1..].iter().all(|s| s == "not-run"), "{json:#}");
    let c = &json["cases"][i];
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("died from signal 6 (SIGABRT)"),
        "{c}"
    );
}
