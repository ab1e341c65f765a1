//! What ninja is running now, known without a timing record: the build graph of the configured
//! `build.ninja`, the outputs ninja has finished (its `.ninja_log`, appended as each edge ends) and
//! the running count `%r` of its status line ([`super::eta::NINJA_STATUS`]).
//!
//! ninja prints an edge's description only when the edge finishes unless its output is a smart
//! terminal (ninja's `src/status_printer.cc`, `BuildEdgeStarted`/`BuildEdgeFinished`), and a
//! build in a toolchain writes to a pipe. So the running edges are inferred: an edge ninja needs
//! for its default targets can start once every input is built; when no more such edges are ready
//! than `%r` says are running, ninja runs exactly those (it starts a ready edge as soon as a job
//! slot is free). That is the case for the long, mostly single-threaded device link at the end of an RCCL
//! build, which is then named ("linking librccl.so.1.0 (device link, mostly single-threaded)") rather
//! than the compile that happened to finish last.

use std::collections::HashMap;

/// One `build` statement of a `build.ninja`.
#[derive(Debug, Clone, PartialEq)]
struct Edge {
    /// Explicit and implicit outputs, as written (relative to the build folder, or absolute).
    outputs: Vec<String>,
    /// The rule (`phony`, `CXX_SHARED_LIBRARY_LINKER__rccl_Release`, …).
    rule: String,
    /// Explicit, implicit and order-only inputs (validations excluded): all gate the start.
    inputs: Vec<String>,
}

/// The build graph of one `build.ninja` (its own `build` and `default` statements; `include`d
/// and `subninja` files are not read, CMake puts only rules there).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Graph {
    edges: Vec<Edge>,
    producer: HashMap<String, usize>,
    defaults: Vec<String>,
}

/// Split a `build.ninja` into logical lines: a `$` at the end of a line continues it (ninja's
/// `src/lexer.in.cc`); comments are dropped.
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    for raw in text.lines() {
        let line = if cur.is_empty() {
            raw
        } else {
            raw.trim_start()
        };
        let dollars = line.len() - line.trim_end_matches('$').len();
        if dollars % 2 == 1 {
            cur.push_str(&line[..line.len() - 1]);
            continue;
        }
        cur.push_str(line);
        if !cur.trim_start().starts_with('#') {
            out.push(std::mem::take(&mut cur));
        }
        cur.clear();
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The words of a statement: paths split at unescaped spaces, `$ `, `$:` and `$$` unescaped; an
/// unescaped `:` is its own word (it ends the outputs). `$var` references are kept as written.
fn words(s: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '$' => match it.next() {
                Some(e @ (' ' | ':' | '$')) => cur.push(e),
                Some(e) => {
                    cur.push('$');
                    cur.push(e);
                }
                None => {}
            },
            ' ' | '\t' => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            ':' => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                out.push(":".into());
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

impl Graph {
    /// Read the `build` and `default` statements of a `build.ninja` text. Never fails: a line it
    /// cannot read is skipped (the progress line then names less, never something wrong).
    pub fn parse(text: &str) -> Graph {
        let mut g = Graph::default();
        for line in logical_lines(text) {
            if let Some(rest) = line.strip_prefix("default ") {
                g.defaults.extend(words(rest));
                continue;
            }
            let Some(rest) = line.strip_prefix("build ") else {
                continue;
            };
            let w = words(rest);
            let Some(colon) = w.iter().position(|x| x == ":") else {
                continue;
            };
            let outputs: Vec<String> = w[..colon].iter().filter(|x| *x != "|").cloned().collect();
            let Some(rule) = w.get(colon + 1).cloned() else {
                continue;
            };
            let mut inputs = vec![];
            for x in &w[colon + 2..] {
                match x.as_str() {
                    "|" | "||" => {}
                    "|@" => break,
                    _ => inputs.push(x.clone()),
                }
            }
            let i = g.edges.len();
            for o in &outputs {
                g.producer.insert(o.clone(), i);
            }
            g.edges.push(Edge {
                outputs,
                rule,
                inputs,
            });
        }
        g
    }

    /// The edges ninja runs for its default targets (`default`, else every output no edge reads),
    /// as a mask over the edges.
    fn needed(&self) -> Vec<bool> {
        let mut roots: Vec<&str> = self.defaults.iter().map(String::as_str).collect();
        if roots.is_empty() {
            let read: std::collections::HashSet<&str> = self
                .edges
                .iter()
                .flat_map(|e| e.inputs.iter().map(String::as_str))
                .collect();
            roots = self
                .edges
                .iter()
                .flat_map(|e| e.outputs.iter().map(String::as_str))
                .filter(|o| !read.contains(o))
                .collect();
        }
        let mut needed = vec![false; self.edges.len()];
        let mut stack: Vec<usize> = roots
            .iter()
            .filter_map(|r| self.producer.get(*r).copied())
            .collect();
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut needed[i], true) {
                continue;
            }
            for inp in &self.edges[i].inputs {
                if let Some(&j) = self.producer.get(inp) {
                    stack.push(j);
                }
            }
        }
        needed
    }
}

/// The running edges of one ninja run, as far as they can be known (see the module docs).
#[derive(Debug, Clone)]
pub struct Running {
    graph: Graph,
    needed: Vec<bool>,
    done: Vec<bool>,
    /// The build folder as ninja's outputs name it when absolute (`/build`, or the work path on
    /// the host), stripped to match `build.ninja`'s relative names.
    build_dir: String,
}

impl Running {
    /// Track a run of `graph` in the build folder `build_dir` (as the toolchain sees it).
    pub fn new(graph: Graph, build_dir: &str) -> Running {
        let needed = graph.needed();
        let done = vec![false; graph.edges.len()];
        Running {
            graph,
            needed,
            done,
            build_dir: build_dir.trim_end_matches('/').to_owned(),
        }
    }

    /// ninja logged `output` as finished (a `.ninja_log` line): its edge is done.
    pub fn finished(&mut self, output: &str) {
        let rel = output
            .strip_prefix(&self.build_dir)
            .and_then(|r| r.strip_prefix('/'))
            .unwrap_or(output);
        for name in [output, rel] {
            if let Some(&i) = self.graph.producer.get(name) {
                self.done[i] = true;
            }
        }
    }

    /// Whether the node `name` is built: a source (no edge makes it), a finished edge's output, or
    /// a phony edge's whose inputs are all built. `depth` bounds phony chains (a cycle is
    /// "not built").
    fn built(&self, name: &str, depth: usize) -> bool {
        let Some(&i) = self.graph.producer.get(name) else {
            return true;
        };
        let e = &self.graph.edges[i];
        if e.rule == "phony" {
            return depth < 64 && e.inputs.iter().all(|x| self.built(x, depth + 1));
        }
        self.done[i]
    }

    /// The edges that could run now: needed, not phony, not finished, every input built.
    fn ready(&self) -> Vec<usize> {
        (0..self.graph.edges.len())
            .filter(|&i| {
                let e = &self.graph.edges[i];
                self.needed[i]
                    && !self.done[i]
                    && e.rule != "phony"
                    && e.inputs.iter().all(|x| self.built(x, 0))
            })
            .collect()
    }

    /// What is running when ninja reports `running` running edges: the ready edges named when
    /// there are no more of them than `running`, else `None` (some of several ready edges run,
    /// which ones is not known).
    pub fn describe(&self, running: usize) -> Option<String> {
        if running == 0 {
            return None;
        }
        let ready = self.ready();
        if ready.is_empty() || ready.len() > running {
            return None;
        }
        let mut names: Vec<String> = ready
            .iter()
            .take(2)
            .map(|&i| describe_edge(&self.graph.edges[i]))
            .collect();
        if ready.len() > 2 {
            names.push(format!("{} more", ready.len() - 2));
        }
        Some(names.join(", "))
    }
}

/// A person's name for an edge: `linking librccl.so.1.0 (device link, mostly single-threaded)` for the
/// library's link, `compiling <file>` / `linking <file>` by the CMake rule's kind, else the
/// output's file name.
fn describe_edge(e: &Edge) -> String {
    let out = e.outputs.first().map(String::as_str).unwrap_or("?");
    let file = out.rsplit('/').next().unwrap_or(out);
    let rule = e.rule.to_ascii_uppercase();
    if rule.contains("LINKER") && file.starts_with("librccl.so") {
        format!("linking {file} (device link, mostly single-threaded)")
    } else if rule.contains("LINKER") {
        format!("linking {file}")
    } else if rule.contains("COMPILER") {
        format!("compiling {file}")
    } else {
        file.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NINJA: &str = "# generated\n\
rule CXX_COMPILER__rccl_unscanned_Release\n  command = hipcc -c $in -o $out\n\
build CMakeFiles/rccl.dir/src/a$ b.cc.o: CXX_COMPILER__rccl_unscanned_Release /src/src/a$ b.cc || hipify/src/a.cc\n\
build CMakeFiles/rccl.dir/src/c.cc.o: CXX_COMPILER__rccl_unscanned_Release /src/src/c.cc $\n    | /src/src/c.h || hipify/src/a.cc\n\
build hipify/src/a.cc: CUSTOM_COMMAND /src/src/a.cc\n\
build librccl.so.1.0: CXX_SHARED_LIBRARY_LINKER__rccl_Release CMakeFiles/rccl.dir/src/a$ b.cc.o CMakeFiles/rccl.dir/src/c.cc.o\n\
build librccl.so.1 librccl.so: CMAKE_SYMLINK_LIBRARY librccl.so.1.0\n\
build all: phony librccl.so\n\
build build.ninja: RERUN_CMAKE /src/CMakeLists.txt\n\
default all\n";

    #[test]
    fn the_link_is_named_once_every_compile_finished() {
        let g = Graph::parse(NINJA);
        assert_eq!(g.edges.len(), 7);
        assert!(g.producer.contains_key("CMakeFiles/rccl.dir/src/a b.cc.o"));
        let mut r = Running::new(g, "/build");
        // The hipify step runs first, alone.
        assert_eq!(r.describe(1).as_deref(), Some("a.cc"));
        r.finished("/build/hipify/src/a.cc");
        // Two compiles are ready; with one running, which one is not known.
        assert_eq!(r.describe(1), None);
        assert_eq!(
            r.describe(2).as_deref(),
            Some("compiling a b.cc.o, compiling c.cc.o")
        );
        r.finished("CMakeFiles/rccl.dir/src/a b.cc.o");
        r.finished("CMakeFiles/rccl.dir/src/c.cc.o");
        // The link: not the compile that finished last, and never RERUN_CMAKE (not needed).
        assert_eq!(
            r.describe(1).as_deref(),
            Some("linking librccl.so.1.0 (device link, mostly single-threaded)")
        );
        r.finished("librccl.so.1.0");
        assert_eq!(r.describe(1).as_deref(), Some("librccl.so.1"));
        r.finished("librccl.so.1");
        assert_eq!(r.describe(1), None);
        assert_eq!(r.describe(0), None);
    }

    /// The recorded `.ninja_log` of a real RCCL 2.21.5 build (`tests/data/eta`), replayed as
    /// ninja reports it: each edge's end, with the count of edges still running. The graph is
    /// the build's last stage as RCCL's CMake writes it (the library links every object, the
    /// SONAME links follow the library). While compiles run the link is never named; from the
    /// moment the last object finished, for the 20 minutes the link then ran alone, it is.
    #[test]
    fn the_recorded_rccl_build_names_its_device_link() {
        let log = include_str!("../../tests/data/eta/rccl-2.21.5-debian-sid-control.ninja_log");
        // (start ms, end ms, output) of each edge, by its first relative output.
        let mut steps: Vec<(u64, u64, String)> = vec![];
        let mut seen = std::collections::HashSet::new();
        for l in log.lines().skip(1) {
            let f: Vec<&str> = l.split('\t').collect();
            if f[3].starts_with('/') || !seen.insert(f[4].to_owned()) {
                continue;
            }
            steps.push((
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[3].to_owned(),
            ));
        }
        let objects: Vec<&str> = steps
            .iter()
            .map(|s| s.2.as_str())
            .filter(|o| o.ends_with(".o"))
            .collect();
        assert!(objects.len() > 100, "{}", objects.len());
        let mut ninja = String::new();
        for (_, _, o) in &steps {
            let o = o.replace(' ', "$ ");
            if o.ends_with(".o") {
                ninja.push_str(&format!(
                    "build {o}: CXX_COMPILER__rccl_unscanned_Release x.cpp\n"
                ));
            } else if o == "librccl.so.1.0" {
                let ins: Vec<String> = objects.iter().map(|x| x.replace(' ', "$ ")).collect();
                ninja.push_str(&format!(
                    "build librccl.so.1.0: CXX_SHARED_LIBRARY_LINKER__rccl_Release {}\n",
                    ins.join(" $\n    ")
                ));
            } else if o == "librccl.so.1" {
                ninja.push_str(
                    "build librccl.so.1 librccl.so: CMAKE_SYMLINK_LIBRARY librccl.so.1.0\n",
                );
            } else {
                ninja.push_str(&format!("build {o}: CUSTOM_COMMAND x\n"));
            }
        }
        let mut r = Running::new(Graph::parse(&ninja), "/build");
        let link = steps
            .iter()
            .find(|s| s.2 == "librccl.so.1.0")
            .unwrap()
            .clone();
        let last_object = steps
            .iter()
            .filter(|s| s.2.ends_with(".o"))
            .map(|s| s.1)
            .max()
            .unwrap();
        let mut ends: Vec<&(u64, u64, String)> = steps.iter().collect();
        ends.sort_by_key(|s| s.1);
        let mut named_link = 0;
        for s in ends {
            r.finished(&format!("/build/{}", s.2));
            let running = steps.iter().filter(|x| x.0 <= s.1 && s.1 < x.1).count();
            let what = r.describe(running);
            if s.1 < last_object {
                assert!(
                    !what.as_deref().unwrap_or("").contains("librccl.so.1.0"),
                    "the link named at {} ms while compiles run: {what:?}",
                    s.1
                );
            } else if s.1 < link.1 {
                assert_eq!(
                    what.as_deref(),
                    Some("linking librccl.so.1.0 (device link, mostly single-threaded)"),
                    "at {} ms",
                    s.1
                );
                named_link += 1;
            }
        }
        assert!(named_link >= 1);
        assert!(
            link.1 - last_object > 15 * 60 * 1000,
            "the link ran {} ms alone",
            link.1 - last_object
        );
    }
}
