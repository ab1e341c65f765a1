//! What the call graph says about one kernel ([`Trace`]: the path to a hostcall user, the first
//! indirect call, the undefined functions reached) and how it is worded for `why`.

/// How a hop of a [`Trace`] path was reached from the one before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// A direct call (or a reference to the function's address in the caller's code, or a SOPP
    /// branch into its code).
    Call,
    /// An indirect call whose target comes from the named function table.
    Table(String),
    /// An indirect call that uses no table the kernel references: any function whose address is
    /// stored in the image's data may be its target.
    AddressTaken,
}

/// One function on a [`Trace`] path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    /// Symbol name (`code at 0x…` when the image names no function there).
    pub function: String,
    /// How it was reached from the previous hop (`Call` for the kernel itself).
    pub via: Via,
}

/// How the last function of a [`Trace`] path uses hostcall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum User {
    /// Its name is a known hostcall user ([`crate::scan::amdgpu::is_hostcall_user`]).
    Named,
    /// Its machine code signals the host (`s_sendmsg MSG_INTERRUPT` at this address).
    Interrupt(u64),
}

/// The first indirect call a kernel reaches and what it may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndirectCall {
    /// The function that holds the call.
    pub caller: String,
    /// Address of the `s_swappc_b64` / `s_setpc_b64`.
    pub at: u64,
    /// Function tables referenced by the functions the kernel reaches: (name, entries).
    pub tables: Vec<(String, Vec<String>)>,
    /// When `tables` is empty: how many functions have their address stored in the image's data.
    pub address_taken: usize,
}

/// What the call graph says about one kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// The shortest path to a hostcall user, the kernel first and the user last; direct calls are
    /// preferred over indirect ones and named users over code that only signals the host. Empty
    /// when no hostcall user is reached.
    pub path: Vec<Hop>,
    /// How the last hop uses hostcall (`None` when `path` is empty).
    pub user: Option<User>,
    /// The first indirect call reached, if any.
    pub indirect: Option<IndirectCall>,
    /// Functions reached that the image does not define (undefined symbols), sorted.
    pub external: Vec<String>,
}

/// At most this many table entries are named in a sentence.
const LIST_MAX: usize = 6;

impl Trace {
    /// The trace as one clause for `why` (no hostcall-kind suffix, see `verdict`), or `None` when
    /// nothing was found: e.g. `k_assert → __assert_fail`, or `reaches an indirect call in
    /// k_table whose table op_table includes op_add, op_checked; through it: k_table → [op_table]
    /// op_checked → __assert_fail`.
    pub fn describe(&self) -> Option<String> {
        let path = (!self.path.is_empty()).then(|| {
            let mut s = String::new();
            for (i, h) in self.path.iter().enumerate() {
                if i > 0 {
                    s.push_str(" → ");
                }
                match &h.via {
                    Via::Call => {}
                    Via::Table(t) => {
                        s.push('[');
                        s.push_str(t);
                        s.push_str("] ");
                    }
                    Via::AddressTaken => s.push_str("[address-taken] "),
                }
                s.push_str(&h.function);
            }
            if let Some(User::Interrupt(at)) = self.user {
                let whose = if self.path.len() == 1 {
                    " signals the host itself"
                } else {
                    ", whose machine code signals the host"
                };
                s.push_str(&format!(
                    "{whose} (s_sendmsg MSG_INTERRUPT at 0x{at:x}: hostcall code inlined, e.g. printf)"
                ));
            }
            s
        });
        let through_indirect = self.path.iter().any(|h| h.via != Via::Call);
        let undefined = (!self.external.is_empty()).then(|| {
            format!(
                "reaches {}, which this image does not define",
                list(&self.external)
            )
        });
        let clauses: Vec<String> = match (path, &self.indirect) {
            (Some(p), Some(ind)) if through_indirect => {
                vec![format!("{}; through it: {p}", ind.describe())]
            }
            (Some(p), _) => vec![p],
            (None, Some(ind)) => [
                Some(format!(
                    "{}; none of its possible targets in this image reaches a hostcall user",
                    ind.describe()
                )),
                undefined,
            ]
            .into_iter()
            .flatten()
            .collect(),
            (None, None) => undefined.into_iter().collect(),
        };
        (!clauses.is_empty()).then(|| clauses.join("; "))
    }
}

impl IndirectCall {
    /// `reaches an indirect call in f whose table t includes a, b and 3 more`.
    pub fn describe(&self) -> String {
        let mut s = format!("reaches an indirect call in {}", self.caller);
        if self.tables.is_empty() {
            s.push_str(&format!(
                " through no table it references ({} function(s) of the image have their address stored in data)",
                self.address_taken
            ));
        } else {
            for (i, (t, entries)) in self.tables.iter().enumerate() {
                s.push_str(if i == 0 { " whose table " } else { "; table " });
                s.push_str(&format!("{t} includes {}", list(entries)));
            }
        }
        s
    }
}

/// `a, b, c and 4 more`.
pub(super) fn list(v: &[String]) -> String {
    if v.len() <= LIST_MAX {
        v.join(", ")
    } else {
        format!(
            "{} and {} more",
            v[..LIST_MAX - 1].join(", "),
            v.len() - (LIST_MAX - 1)
        )
    }
}

/// A symbol name for a sentence: control characters and other non-printing characters escaped
/// (`\u{1b}`), since names are read from untrusted files.
pub(super) fn display_name(raw: &[u8]) -> String {
    let s = String::from_utf8_lossy(raw);
    if s.chars().all(|c| !c.is_control()) {
        return s.into_owned();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
