//! NDEBUG injection and the checks that run after configure, before the long build.
//!
//! - [`cmake_flags`] and [`insert_compile_definition`] apply a recipe's [`NdebugStrategy`]
//!   (which strategy reaches the device compile for which RCCL: the recipes' notes).
//! - [`scan_build_ninja`] reads the generated `build.ninja`: which compile edges are device compiles
//!   (they carry `--offload-arch=`, `-x hip`, …), whether each has `-DNDEBUG` in effect, and which
//!   offload targets the compile and link lines name.
//! - [`configure_targets`] reads the `-- Compiling for <list>` line from the configure output
//!   (ROCm/rccl#958, #1138: the flag has been ignored before; the log is the ground truth).

use std::collections::BTreeSet;

use anyhow::bail;

use crate::recipe::NdebugStrategy;

/// The CMake arguments a strategy adds (the build type is always passed separately).
pub fn cmake_flags(strategy: NdebugStrategy, recipe_options: &[String]) -> Vec<String> {
    match strategy {
        NdebugStrategy::CxxFlags => {
            // Merge with a CMAKE_CXX_FLAGS the recipe already sets (the recipe's copy is dropped by
            // the caller via `without_cxx_flags`).
            let existing = recipe_options.iter().find_map(|o| {
                o.strip_prefix("-DCMAKE_CXX_FLAGS=")
                    .or_else(|| o.strip_prefix("-DCMAKE_CXX_FLAGS:STRING="))
            });
            match existing {
                Some(e) if !e.trim().is_empty() => {
                    vec![format!("-DCMAKE_CXX_FLAGS={} -DNDEBUG", e.trim())]
                }
                _ => vec!["-DCMAKE_CXX_FLAGS=-DNDEBUG".into()],
            }
        }
        NdebugStrategy::ReleaseBuildType
        | NdebugStrategy::CompileDefinition
        | NdebugStrategy::None => vec![],
    }
}

/// The recipe's CMake options without a `CMAKE_CXX_FLAGS` entry when the strategy rewrites it.
pub fn recipe_options(strategy: NdebugStrategy, options: &[String]) -> Vec<String> {
    options
        .iter()
        .filter(|o| {
            !(strategy == NdebugStrategy::CxxFlags
                && (o.starts_with("-DCMAKE_CXX_FLAGS=")
                    || o.starts_with("-DCMAKE_CXX_FLAGS:STRING=")))
        })
        .cloned()
        .collect()
}

/// The line inserted after `project(...)` by the `compile-definition` strategy.
pub const COMPILE_DEFINITION_LINE: &str =
    "add_compile_definitions(NDEBUG) # inserted by rcclfix (NDEBUG strategy compile-definition)";

/// Insert [`COMPILE_DEFINITION_LINE`] right after the first top-level `project(...)` command of a
/// CMakeLists.txt text. Comments (`# …`) and quoted arguments are skipped when matching parentheses.
///
/// Errors: no `project(` command, or its parenthesis never closes.
pub fn insert_compile_definition(text: &str) -> anyhow::Result<String> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut at_command_start = true;
    while i < b.len() {
        let c = b[i];
        match c {
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\n' => at_command_start = true,
            b' ' | b'\t' | b'\r' => {}
            _ if at_command_start && (c.is_ascii_alphabetic() || c == b'_') => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let word = &text[start..i];
                let mut j = i;
                while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
                    j += 1;
                }
                if j < b.len() && b[j] == b'(' {
                    let close = matching_paren(b, j)?;
                    if word.eq_ignore_ascii_case("project") {
                        let mut out =
                            String::with_capacity(text.len() + COMPILE_DEFINITION_LINE.len() + 2);
                        out.push_str(&text[..=close]);
                        out.push('\n');
                        out.push_str(COMPILE_DEFINITION_LINE);
                        out.push('\n');
                        out.push_str(&text[close + 1..]);
                        return Ok(out);
                    }
                    i = close + 1;
                    at_command_start = false;
                    continue;
                }
                at_command_start = false;
                continue;
            }
            _ => at_command_start = false,
        }
        i += 1;
    }
    bail!("no project(...) command found")
}

fn matching_paren(b: &[u8], open: usize) -> anyhow::Result<usize> {
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i);
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    bail!("unbalanced parentheses after byte {open}")
}

/// What `build.ninja` says about device compiles.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NinjaFacts {
    /// Outputs of device compile edges (compile edges that carry an offload target or `-x hip`).
    pub device_compiles: Vec<String>,
    /// Device compile outputs on which `-DNDEBUG` is not in effect.
    pub without_ndebug: Vec<String>,
    /// Offload targets named on compile and link lines (`--offload-arch=`, `--amdgpu-target=`).
    pub offload_targets: BTreeSet<String>,
}

impl NinjaFacts {
    /// Whether there are device compiles and every one of them has `-DNDEBUG`.
    pub fn ndebug_on_device(&self) -> bool {
        !self.device_compiles.is_empty() && self.without_ndebug.is_empty()
    }
}

/// Read a `build.ninja` text (CMake's Ninja generator): each `build` edge with its indented
/// variables (`FLAGS`, `DEFINES`, `LINK_FLAGS`, `LINK_LIBRARIES`, `COMMAND`).
pub fn scan_build_ninja(text: &str) -> NinjaFacts {
    let mut facts = NinjaFacts::default();
    let mut edge: Option<(String, String, Vec<String>)> = None; // (outputs, rule, variable values)
    let flush = |edge: &mut Option<(String, String, Vec<String>)>, facts: &mut NinjaFacts| {
        let Some((outputs, rule, vars)) = edge.take() else {
            return;
        };
        let tokens: Vec<&str> = vars.iter().flat_map(|v| v.split_whitespace()).collect();
        let mut is_device = rule.contains("HIP_COMPILER") || rule.contains("RCCLDEV");
        let mut ndebug = false;
        let is_compile = rule.contains("_COMPILER__") || rule.starts_with("CUSTOM_COMMAND");
        let is_link = rule.contains("_LINKER__");
        for (k, t) in tokens.iter().enumerate() {
            let arch = t
                .strip_prefix("--offload-arch=")
                .or_else(|| t.strip_prefix("--amdgpu-target="))
                .or_else(|| t.strip_prefix("--cuda-gpu-arch="));
            if let Some(a) = arch {
                if is_compile || is_link {
                    facts
                        .offload_targets
                        .insert(a.trim_matches(['"', '\'']).to_owned());
                }
                is_device = true;
            }
            if *t == "-x" && tokens.get(k + 1) == Some(&"hip") {
                is_device = true;
            }
            if *t == "-DNDEBUG"
                || t.starts_with("-DNDEBUG=")
                || (*t == "-D" && tokens.get(k + 1) == Some(&"NDEBUG"))
            {
                ndebug = true;
            }
            if *t == "-UNDEBUG" || (*t == "-U" && tokens.get(k + 1) == Some(&"NDEBUG")) {
                ndebug = false;
            }
        }
        // A custom command counts only when it names an offload architecture itself.
        let custom_without_arch = rule.starts_with("CUSTOM_COMMAND")
            && !tokens.iter().any(|t| t.contains("offload-arch"));
        if is_compile && is_device && !custom_without_arch {
            facts.device_compiles.push(outputs.clone());
            if !ndebug {
                facts.without_ndebug.push(outputs);
            }
        }
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("build ") {
            flush(&mut edge, &mut facts);
            let (outputs, after) = split_unescaped_colon(rest);
            let rule = after.split_whitespace().next().unwrap_or("").to_owned();
            edge = Some((outputs.trim().to_owned(), rule, vec![]));
        } else if line.starts_with("  ") || line.starts_with('\t') {
            if let Some((_, _, vars)) = edge.as_mut() {
                if let Some((k, v)) = line.trim().split_once(" = ") {
                    if matches!(
                        k,
                        "FLAGS"
                            | "DEFINES"
                            | "LINK_FLAGS"
                            | "LINK_LIBRARIES"
                            | "COMMAND"
                            | "LANGUAGE_COMPILE_FLAGS"
                    ) {
                        vars.push(v.to_owned());
                    }
                }
            }
        } else if !line.trim().is_empty() {
            flush(&mut edge, &mut facts);
        }
    }
    flush(&mut edge, &mut facts);
    facts
}

fn split_unescaped_colon(s: &str) -> (&str, &str) {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' {
            i += 2;
            continue;
        }
        if b[i] == b':' {
            return (&s[..i], &s[i + 1..]);
        }
        i += 1;
    }
    (s, "")
}

/// The target list from the last `Compiling for <list>` line of a configure output, split on `;`,
/// `,` and whitespace; `None` when the project prints no such line.
pub fn configure_targets(configure_output: &str) -> Option<BTreeSet<String>> {
    configure_output.lines().rev().find_map(|l| {
        let (_, rest) = l.split_once("Compiling for ")?;
        Some(
            rest.split([';', ',', ' ', '\t'])
                .map(|s| s.trim_matches(['"', '\'', '[', ']']))
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_after_project() {
        let t = "cmake_minimum_required(VERSION 3.5)\n# project(fake)\nset(X \"a)\")\nproject(rccl\n  CXX) # c\nadd_library(x)\n";
        let out = insert_compile_definition(t).unwrap();
        assert!(
            out.contains("project(rccl\n  CXX)\nadd_compile_definitions(NDEBUG)"),
            "{out}"
        );
        assert_eq!(out.matches("add_compile_definitions").count(), 1);
    }

    #[test]
    fn no_project_is_an_error() {
        assert!(insert_compile_definition("add_library(x)\n# project(y)\n").is_err());
    }

    #[test]
    fn project_name_inside_other_command_is_not_matched() {
        let out = insert_compile_definition("message(STATUS project(x))\nPROJECT (y)\n").unwrap();
        assert!(
            out.starts_with("message(STATUS project(x))\nPROJECT (y)\nadd_compile_definitions"),
            "{out}"
        );
    }

    const NINJA: &str = "\
build CMakeFiles/rccl.dir/src/a.cpp.o: CXX_COMPILER__rccl_unscanned_Release /s/src/a.cpp || x
  DEFINES = -D__HIP_PLATFORM_AMD__=1 -Drccl_EXPORTS
  FLAGS = -O3 -std=c++17 -fPIC -fgpu-rdc -x hip --offload-arch=gfx1100

build CMakeFiles/rccl.dir/src/host.cpp.o: CXX_COMPILER__rccl_unscanned_Release /s/src/host.cpp
  FLAGS = -O3 -fPIC

build librccl.so.1.0: CXX_SHARED_LIBRARY_LINKER__rccl_Release CMakeFiles/rccl.dir/src/a.cpp.o
  LINK_FLAGS = -fgpu-rdc --offload-arch=gfx1100
";

    #[test]
    fn device_compile_without_ndebug() {
        let f = scan_build_ninja(NINJA);
        assert_eq!(f.device_compiles, vec!["CMakeFiles/rccl.dir/src/a.cpp.o"]);
        assert_eq!(f.without_ndebug.len(), 1);
        assert!(!f.ndebug_on_device());
        assert_eq!(
            f.offload_targets.iter().collect::<Vec<_>>(),
            vec!["gfx1100"]
        );
    }

    #[test]
    fn device_compile_with_ndebug_in_defines_or_flags() {
        let f = scan_build_ninja(&NINJA.replace("-Drccl_EXPORTS", "-DNDEBUG -Drccl_EXPORTS"));
        assert!(f.ndebug_on_device());
        let f = scan_build_ninja(&NINJA.replace("FLAGS = -O3 -std", "FLAGS = -O3 -DNDEBUG -std"));
        assert!(f.ndebug_on_device());
        let f = scan_build_ninja(
            &NINJA.replace("FLAGS = -O3 -std", "FLAGS = -O3 -DNDEBUG -UNDEBUG -std"),
        );
        assert!(!f.ndebug_on_device());
    }

    #[test]
    fn compiling_for_line() {
        let out = "-- HIP runtime: rocclr\n-- Compiling for gfx1100;gfx1101\n-- Configuring done\n";
        let t = configure_targets(out).unwrap();
        assert_eq!(
            t.into_iter().collect::<Vec<_>>(),
            vec!["gfx1100", "gfx1101"]
        );
        assert!(configure_targets("-- nothing\n").is_none());
    }
}
