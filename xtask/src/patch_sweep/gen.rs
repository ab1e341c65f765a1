//! The program generator of `patch-sweep`: from a seed, one HIP source file (a *batch*) holding
//! several small *programs* (each in its own namespace: `__device__` functions, classes with a
//! virtual `f`, function pointers and tables, 1 to 6 kernels), and for every kernel the truth in
//! the source's semantics: whether it can reach device `printf`, `malloc`/`free`, an assert's
//! message or a read of the hostcall slot of the implicit arguments.
//!
//! The truth over-approximates indirect calls the way issue 39 asks the analysis to: an indirect
//! call (virtual call, function pointer, table, a pointer the host read) can reach every function
//! whose address is taken anywhere in the batch (the code object is the batch), and a call
//! through a computed address (`(fn_t)((char*)&f + off)`, runtime `off`) can reach anything.
//! Nothing the generator emits takes an address it does not use, so the truth is also what the
//! compiled code can do.
//!
//! A batch has a theme, so that a whole-image proof has something to get wrong: `Quiet` (no
//! hostcall user in the source; slot reads, `abort`, `__builtin_trap`, a user `_wassert`),
//! `Hidden` (`printf`/`malloc` only in functions no kernel calls directly), `Asserts` (asserts
//! anywhere, `printf`/`malloc` hidden as in `Hidden`, a user `_wassert` that prints and returns)
//! and `Mixed` (anything anywhere, mostly refusals). Outside `Mixed`, only one program of a batch
//! (its hazard) gets `printf`, `malloc` or a slot read, since one found path refuses the image.

use std::collections::BTreeSet;
use std::fmt::Write;

/// The implicit-argument offset of `hidden_hostcall_buffer` for code object v5 and v6 (llvm
/// `AMDGPUUsage.rst`, "Code Object V5 Metadata", hidden kernel arguments: the hostcall pointer at
/// offset 80 of the implicit arguments; 24 in code object v4).
pub const SLOT_V5: u32 = 80;

/// SplitMix64: a small deterministic generator, so a seed names a batch on every host.
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// True with probability `p` percent.
    pub fn pct(&mut self, p: u32) -> bool {
        self.below(100) < p as usize
    }
}

/// What a batch's programs may contain (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Theme {
    Quiet,
    Hidden,
    Asserts,
    Mixed,
}

/// Something a function does that the truth cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    Printf,
    Malloc,
    Assert,
    Slot,
    Abort,
    Trap,
}

impl Effect {
    /// Whether it uses hostcall: with `asserts`, an assert's message is gone (the handler traps).
    fn hostcall(self, asserts: bool) -> bool {
        match self {
            Effect::Printf | Effect::Malloc | Effect::Slot => true,
            Effect::Assert => !asserts,
            Effect::Abort | Effect::Trap => false,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Effect::Printf => "printf",
            Effect::Malloc => "malloc",
            Effect::Assert => "assert message",
            Effect::Slot => "reads the hostcall slot",
            Effect::Abort => "abort",
            Effect::Trap => "trap",
        }
    }
}

/// One node of the truth graph: a function, a virtual method or a kernel.
#[derive(Debug, Default)]
struct Node {
    name: String,
    calls: Vec<usize>,
    effects: Vec<Effect>,
    indirect: bool,
    computed: bool,
}

/// One kernel and its truth.
#[derive(Debug, Clone)]
pub struct KernelTruth {
    /// The kernel's symbol (every generated kernel is `extern "C"`).
    pub name: String,
    /// The program it belongs to (index within the batch).
    pub program: usize,
    /// The path to hostcall for plain `patch`, as `k -> f -> … : effect`, if there is one.
    pub plain: Option<String>,
    /// The same with assert messages cut (`patch --asserts` traps the handler).
    pub asserts: Option<String>,
}

/// One generated batch: the source and the truth of each kernel.
#[derive(Debug)]
pub struct Batch {
    pub theme: Theme,
    pub programs: usize,
    pub source: String,
    pub kernels: Vec<KernelTruth>,
    /// User functions with a device-assert handler's name that return (rewriting them to trap
    /// changes what the program does).
    pub user_handlers: Vec<String>,
}

/// Generate batch `index` of the sweep seeded with `seed`: `programs` programs.
pub fn batch(seed: u64, index: usize, programs: usize) -> Batch {
    let mut r = Rng::new(seed ^ (index as u64).wrapping_mul(0xa076_1d64_78bd_642f));
    let theme = match r.below(100) {
        0..=29 => Theme::Quiet,
        30..=54 => Theme::Hidden,
        55..=84 => Theme::Asserts,
        _ => Theme::Mixed,
    };
    let mut g = Gen {
        r,
        theme,
        nodes: Vec::new(),
        taken: BTreeSet::new(),
        src: String::new(),
        kernels: Vec::new(),
        user_handlers: Vec::new(),
        wassert: None,
    };
    g.src.push_str("// generated by `cargo xtask patch-sweep`; see xtask/src/patch_sweep/gen.rs\n#include <hip/hip_runtime.h>\n#include <cassert>\n#include <new>\ntypedef int (*fn_t)(int);\n\n");
    if theme != Theme::Hidden && g.r.pct(40) {
        // `_wassert` is an ordinary name on Linux (HIP's `hip_assert.h` defines it under _WIN32).
        let prints = theme != Theme::Quiet && g.r.pct(50);
        let body = if prints {
            "printf(\"user wassert %u\\n\", line); sink_w = line;"
        } else {
            "sink_w = line;"
        };
        let _ = writeln!(g.src, "__device__ unsigned sink_w;\nextern \"C\" __device__ __attribute__((noinline)) void _wassert(const wchar_t*, const wchar_t*, unsigned line) {{ {body} }}\n");
        let n = g.node("_wassert");
        if prints {
            g.nodes[n].effects.push(Effect::Printf);
        }
        g.wassert = Some(n);
        g.user_handlers.push("_wassert".into());
    }
    // One program of the batch carries the hazard (printf, malloc, slot reads); the others only
    // what the theme allows everywhere, so that one missed path is a patched image.
    let hazard = g.r.below(programs.max(1));
    for p in 0..programs {
        g.program(p, p == hazard);
    }
    g.finish(programs)
}

struct Gen {
    r: Rng,
    theme: Theme,
    nodes: Vec<Node>,
    /// Address-taken nodes.
    taken: BTreeSet<usize>,
    src: String,
    /// (kernel node, program).
    kernels: Vec<(usize, usize)>,
    user_handlers: Vec<String>,
    wassert: Option<usize>,
}

/// A function of one program before its body is written: its direct callees.
struct Proto {
    node: usize,
    ident: String,
    calls: Vec<usize>,
    noinline: bool,
}

impl Gen {
    fn node(&mut self, name: &str) -> usize {
        self.nodes.push(Node {
            name: name.into(),
            ..Node::default()
        });
        self.nodes.len() - 1
    }

    fn program(&mut self, p: usize, hazard: bool) {
        let _ = writeln!(self.src, "namespace p{p} {{");
        let nf = 2 + self.r.below(5);
        let mut fs: Vec<Proto> = Vec::new();
        for i in 0..nf {
            let ident = format!("f{i}");
            let node = self.node(&format!("p{p}::{ident}"));
            let mut calls = Vec::new();
            if i > 0 {
                for _ in 0..self.r.below(3) {
                    let j = self.r.below(i);
                    if !calls.contains(&j) {
                        calls.push(j);
                    }
                }
            }
            let noinline = self.r.pct(60);
            fs.push(Proto {
                node,
                ident,
                calls,
                noinline,
            });
        }
        // Which functions the kernels call directly, and which only through an address.
        let mut direct: Vec<usize> = Vec::new();
        let mut indirect: Vec<usize> = Vec::new();
        let nk = 1 + self.r.below(3);
        let mut kernel_calls: Vec<Vec<usize>> = Vec::new();
        for _ in 0..nk {
            let c = vec![self.r.below(nf)];
            kernel_calls.push(c);
        }
        // Indirect features: virtual, function pointer set by a kernel, table, host-read pointer,
        // computed address.
        let mut feats: Vec<u8> = Vec::new();
        for _ in 0..1 + self.r.below(2) {
            feats.push(self.r.below(5) as u8);
        }
        let mut feat_targets: Vec<(u8, Vec<usize>)> = Vec::new();
        for &f in &feats {
            let t = vec![self.r.below(nf), self.r.below(nf)];
            indirect.extend(&t);
            feat_targets.push((f, t));
        }
        for c in &kernel_calls {
            direct.extend(c);
        }
        // Functions reached by a direct call from a kernel (closure over direct calls).
        let mut reach_direct = vec![false; nf];
        let mut stack = direct.clone();
        while let Some(i) = stack.pop() {
            if !reach_direct[i] {
                reach_direct[i] = true;
                stack.extend(fs[i].calls.iter().copied());
            }
        }
        // Effects, by theme.
        for (i, f) in fs.iter().enumerate() {
            let hidden_ok = hazard && !reach_direct[i];
            let e = match self.theme {
                Theme::Quiet => match self.r.below(10) {
                    0 | 3 if hazard => Some(Effect::Slot),
                    1 => Some(Effect::Abort),
                    2 => Some(Effect::Trap),
                    _ => None,
                },
                Theme::Hidden => match self.r.below(10) {
                    0..=3 if hidden_ok => Some(Effect::Printf),
                    4 if hidden_ok => Some(Effect::Malloc),
                    5 => Some(Effect::Trap),
                    _ => None,
                },
                Theme::Asserts => match self.r.below(10) {
                    0..=3 => Some(Effect::Assert),
                    4 if hidden_ok => Some(Effect::Printf),
                    5 if hidden_ok => Some(Effect::Malloc),
                    6 => Some(Effect::Abort),
                    _ => None,
                },
                Theme::Mixed => match self.r.below(10) {
                    0 | 1 => Some(Effect::Printf),
                    2 => Some(Effect::Malloc),
                    3 | 4 => Some(Effect::Assert),
                    5 => Some(Effect::Slot),
                    6 => Some(Effect::Abort),
                    _ => None,
                },
            };
            if let Some(e) = e {
                self.nodes[f.node].effects.push(e);
            }
        }
        // Function bodies.
        for i in 0..nf {
            let node = fs[i].node;
            let mut body = String::from("  x = x * 3 + 1;\n");
            for &j in &fs[i].calls {
                let _ = writeln!(body, "  x += {}(x ^ {});", fs[j].ident, j + 1);
                self.nodes[node].calls.push(fs[j].node);
            }
            if let Some(w) = self.wassert {
                if (self.theme != Theme::Quiet && self.r.pct(15)) || self.r.pct(5) {
                    body.push_str("  if (x == 4242) _wassert(L\"x\", L\"f\", 7);\n");
                    self.nodes[node].calls.push(w);
                }
            }
            for e in self.nodes[node].effects.clone() {
                body.push_str(&effect_code(e, p, i));
            }
            let attr = if fs[i].noinline {
                "__attribute__((noinline)) "
            } else {
                ""
            };
            let _ = write!(
                self.src,
                "__device__ {attr}int {}(int x) {{\n{body}  return x;\n}}\n",
                fs[i].ident
            );
        }
        // Kernels with direct calls.
        for (k, c) in kernel_calls.iter().enumerate() {
            let name = format!("p{p}_k{k}");
            let kn = self.node(&name);
            let mut body = String::new();
            for &j in c {
                let _ = writeln!(body, "  o[0] = {}(o[1]);", fs[j].ident);
                self.nodes[kn].calls.push(fs[j].node);
            }
            if (hazard || self.theme == Theme::Mixed)
                && self.theme != Theme::Hidden
                && self.r.pct(15)
            {
                body.push_str(&kernel_slot_code());
                self.nodes[kn].effects.push(Effect::Slot);
            }
            if self.theme == Theme::Mixed && self.r.pct(20) {
                body.push_str("  printf(\"k %d\\n\", o[0]);\n");
                self.nodes[kn].effects.push(Effect::Printf);
            }
            let _ = write!(
                self.src,
                "extern \"C\" __global__ void {name}(int* o) {{\n{body}}}\n"
            );
            self.kernels.push((kn, p));
        }
        // Indirect features.
        for (fi, (f, t)) in feat_targets.iter().enumerate() {
            let (a, b) = (&fs[t[0]].ident, &fs[t[1]].ident);
            let (na, nb) = (fs[t[0]].node, fs[t[1]].node);
            match f {
                0 => {
                    // A class with a virtual f, constructed by one kernel, called by another.
                    let base = self.node(&format!("p{p}::B{fi}::f"));
                    let der = self.node(&format!("p{p}::D{fi}::f"));
                    self.nodes[base].calls.push(na);
                    self.nodes[der].calls.push(nb);
                    self.taken.extend([base, der]);
                    let _ = write!(self.src, "struct B{fi} {{ __device__ virtual int f(int x) {{ return {a}(x); }} }};\nstruct D{fi} : B{fi} {{ __device__ int f(int x) override {{ return {b}(x + 1); }} }};\nalignas(16) __device__ unsigned char buf{fi}[64];\n__device__ B{fi}* obj{fi};\n");
                    self.kernel(p, &format!("p{p}_make{fi}"), "int* o", &format!("  if (o[0]) obj{fi} = new (buf{fi}) D{fi}(); else obj{fi} = new (buf{fi}) B{fi}();\n"), &[], false, false);
                    self.kernel(
                        p,
                        &format!("p{p}_virt{fi}"),
                        "int* o",
                        &format!("  o[0] = obj{fi}->f(o[1]);\n"),
                        &[],
                        true,
                        false,
                    );
                }
                1 => {
                    // A __device__ function pointer set by one kernel, called by another.
                    self.taken.extend([na, nb]);
                    let _ = writeln!(self.src, "__device__ fn_t fp{fi};");
                    self.kernel(
                        p,
                        &format!("p{p}_setfp{fi}"),
                        "int* o",
                        &format!("  fp{fi} = o[0] ? {a} : {b};\n"),
                        &[],
                        false,
                        false,
                    );
                    self.kernel(
                        p,
                        &format!("p{p}_callfp{fi}"),
                        "int* o",
                        &format!("  o[0] = fp{fi}(o[1]);\n"),
                        &[],
                        true,
                        false,
                    );
                }
                2 => {
                    // A __device__ table of function pointers.
                    self.taken.extend([na, nb]);
                    let _ = writeln!(self.src, "__device__ fn_t tab{fi}[2] = {{ {a}, {b} }};");
                    self.kernel(
                        p,
                        &format!("p{p}_tab{fi}"),
                        "int* o",
                        &format!("  o[0] = tab{fi}[o[1] & 1](o[2]);\n"),
                        &[],
                        true,
                        false,
                    );
                }
                3 => {
                    // A pointer the host reads with hipMemcpyFromSymbol and passes back.
                    self.taken.insert(na);
                    let _ = writeln!(self.src, "__device__ fn_t hfp{fi} = {a};\n__host__ void host_read{fi}(fn_t* out) {{ (void)hipMemcpyFromSymbol(out, HIP_SYMBOL(hfp{fi}), sizeof(fn_t)); }}");
                    self.kernel(
                        p,
                        &format!("p{p}_hostfp{fi}"),
                        "int* o, fn_t g",
                        "  o[0] = g(o[1]);\n",
                        &[],
                        true,
                        false,
                    );
                }
                _ => {
                    // A computed address: &f + a runtime offset.
                    self.taken.insert(na);
                    self.kernel(
                        p,
                        &format!("p{p}_calc{fi}"),
                        "int* o, long off",
                        &format!("  fn_t g = (fn_t)((char*)&{a} + off);\n  o[0] = g(o[1]);\n"),
                        &[],
                        true,
                        true,
                    );
                }
            }
        }
        let _ = writeln!(self.src, "}} // namespace p{p}\n");
    }

    #[allow(clippy::too_many_arguments)]
    fn kernel(
        &mut self,
        p: usize,
        name: &str,
        params: &str,
        body: &str,
        calls: &[usize],
        indirect: bool,
        computed: bool,
    ) {
        let kn = self.node(name);
        self.nodes[kn].calls.extend(calls);
        self.nodes[kn].indirect = indirect;
        self.nodes[kn].computed = computed;
        let _ = write!(
            self.src,
            "extern \"C\" __global__ void {name}({params}) {{\n{body}}}\n"
        );
        self.kernels.push((kn, p));
    }

    fn finish(self, programs: usize) -> Batch {
        let any_hostcall = |asserts: bool| {
            self.nodes
                .iter()
                .flat_map(|n| &n.effects)
                .any(|e| e.hostcall(asserts) || *e == Effect::Assert)
        };
        let mut kernels = Vec::new();
        for &(k, p) in &self.kernels {
            let path = |asserts: bool| self.path(k, asserts, any_hostcall(asserts));
            kernels.push(KernelTruth {
                name: self.nodes[k].name.clone(),
                program: p,
                plain: path(false),
                asserts: path(true),
            });
        }
        Batch {
            theme: self.theme,
            programs,
            source: self.src,
            kernels,
            user_handlers: self.user_handlers,
        }
    }

    /// Breadth-first from kernel `k`: the first node with a hostcall effect, as a path line.
    fn path(&self, k: usize, asserts: bool, anything: bool) -> Option<String> {
        let mut parent: Vec<Option<usize>> = vec![None; self.nodes.len()];
        let mut seen = vec![false; self.nodes.len()];
        let mut queue = std::collections::VecDeque::from([k]);
        seen[k] = true;
        let line = |parent: &[Option<usize>], mut n: usize, what: &str| {
            let mut names = vec![self.nodes[n].name.clone()];
            while let Some(q) = parent[n] {
                names.push(self.nodes[q].name.clone());
                n = q;
            }
            names.reverse();
            format!("{}: {what}", names.join(" -> "))
        };
        while let Some(n) = queue.pop_front() {
            let node = &self.nodes[n];
            if let Some(e) = node.effects.iter().find(|e| e.hostcall(asserts)) {
                return Some(line(&parent, n, e.name()));
            }
            if node.computed && anything {
                return Some(line(&parent, n, "calls a computed code address"));
            }
            let mut next: Vec<usize> = node.calls.clone();
            if node.indirect {
                next.extend(&self.taken);
            }
            for m in next {
                if !seen[m] {
                    seen[m] = true;
                    parent[m] = Some(n);
                    queue.push_back(m);
                }
            }
        }
        None
    }
}

/// The source of one effect in function `f{i}` of program `p`.
fn effect_code(e: Effect, p: usize, i: usize) -> String {
    match e {
        Effect::Printf => format!("  if (x & 1) printf(\"p{p} f{i} %d\\n\", x);\n"),
        Effect::Malloc => "  { int* m = (int*)malloc(16); if (m) { m[0] = x; x += m[0]; free(m); } }\n".into(),
        Effect::Assert => format!("  assert(x != {});\n", 1000 + i),
        Effect::Slot => format!("  x += (int)*(volatile long*)((char*)__builtin_amdgcn_implicitarg_ptr() + {SLOT_V5});\n"),
        Effect::Abort => "  if (x == 777) abort();\n".into(),
        Effect::Trap => "  if (x == 778) __builtin_trap();\n".into(),
    }
}

/// A kernel's own read of the hostcall slot.
fn kernel_slot_code() -> String {
    format!(
        "  o[2] = (int)*(volatile long*)((char*)__builtin_amdgcn_implicitarg_ptr() + {SLOT_V5});\n"
    )
}
