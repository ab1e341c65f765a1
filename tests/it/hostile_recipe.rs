//! Hostile recipe inputs of [`super::hostile_source`]'s table (issue 20, the second adversarial
//! pass): `recipe pin` on a tag that points to a blob or a tree (refused: nothing to build), and a
//! recipe's `cmake_options` that set what rcclfix passes or controls itself (refused at load, one
//! line naming the file and the option), beside linker flags that still plan.

use std::path::Path;

use super::hostile_source::{git, input, recipe, repo, row, In, Row};

/// The rows (class 5 of the mediums).
pub(crate) fn rows(d: &Path) -> Vec<Row> {
    let mut rows = vec![];
    // A tag that points to a blob or a tree has no commit to pin.
    let src = d.join("src-blobtag");
    repo(&src, &[]);
    git(&src, &["tag", "-d", "v0.1.0"]);
    let blob = git(&src, &["rev-parse", "HEAD:CMakeLists.txt"]);
    let tree = git(&src, &["rev-parse", "HEAD^{tree}"]);
    for (what, tag_args, kind) in [
        (
            "a lightweight tag of a blob",
            vec!["tag", "v0.1.0", &blob],
            "blob",
        ),
        (
            "an annotated tag of a blob",
            vec!["tag", "-a", "-m", "x", "v0.1.0", &blob],
            "blob",
        ),
        (
            "a lightweight tag of a tree",
            vec!["tag", "v0.1.0", &tree],
            "tree",
        ),
    ] {
        let dir = d.join(format!("src-{kind}-{}", tag_args.len()));
        std::fs::create_dir_all(&dir).unwrap();
        git(
            &dir,
            &["clone", "-q", "--mirror", &src.display().to_string(), "."],
        );
        git(&dir, &tag_args);
        let r = input(
            d,
            &format!("{kind}-{}.toml", tag_args.len()),
            &recipe(&dir.display().to_string(), None, "", ""),
        );
        let name: &'static str =
            Box::leak(format!("class 5: recipe pin refuses {what}").into_boxed_str());
        let mut row_ = row(
            name,
            &[
                &"recipe",
                &"pin",
                &"--lockfile",
                &"out/lock.toml",
                &"--recipe",
                &r,
            ],
            2,
            &format!("error: tag v0.1.0 points to a {kind} ("),
        );
        row_.looked_in = In::Stdout;
        row_.check = Some(Box::new(|d: &Path, _: &str, _: &str| {
            if d.join("out/lock.toml").exists() {
                return Err("a lockfile was written".into());
            }
            Ok(())
        }));
        rows.push(row_);
    }

    // A recipe's cmake_options may not override what rcclfix passes itself.
    for (k, opt) in [
        "-DCMAKE_BUILD_TYPE=Debug",
        "-DGPU_TARGETS=gfx90a",
        "-DAMDGPU_TARGETS=gfx90a",
        "-DCMAKE_CXX_FLAGS_RELEASE=-O0",
        "-DCMAKE_CXX_FLAGS=-UNDEBUG",
        "-DCMAKE_HIP_FLAGS:STRING=-UNDEBUG",
        "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO_INIT=-g",
        "-DCMAKE_PROJECT_INCLUDE=/tmp/x.cmake",
        "-DCMAKE_PROJECT_rccl_INCLUDE_BEFORE=/tmp/x.cmake",
        "-DCMAKE_TOOLCHAIN_FILE=/tmp/t.cmake",
        "-DCMAKE_CXX_COMPILER_LAUNCHER=/tmp/evil",
        "-DCMAKE_CXX_COMPILER=/usr/bin/g++",
        "-DCMAKE_HIP_ARCHITECTURES=gfx90a",
        "-DROCM_PATH=/opt/other",
        "-D CMAKE_BUILD_TYPE=Debug",
        "-DHIP_CLANG_PATH=/opt/other/llvm/bin",
        "-DHIP_PATH=/opt/other",
        "-Dhip_DIR=/opt/other/lib/cmake/hip",
        "-DCMAKE_PREFIX_PATH=/opt/other",
        "-DCMAKE_MODULE_PATH=/tmp/modules",
        "-DCMAKE_FIND_ROOT_PATH:PATH=/opt/other",
        // CMake takes the quotes off a quoted name (issue 40, item 12).
        "-D\"CMAKE_CXX_FLAGS\"=-UNDEBUG",
        "-D\"CMAKE_CXX_FLAGS_RELEASE\":STRING=-O0",
        // Rule variables: the command lines themselves (issue 40, item 12).
        "-DCMAKE_CXX_COMPILE_OBJECT=<CMAKE_CXX_COMPILER> -UNDEBUG -o <OBJECT> -c <SOURCE>",
        "-DCMAKE_HIP_COMPILE_OBJECT=<CMAKE_HIP_COMPILER> -o <OBJECT> -c <SOURCE>",
        "-DCMAKE_CXX_CREATE_SHARED_LIBRARY=/tmp/evil <TARGET>",
        "-DCMAKE_CXX_LINK_EXECUTABLE=/tmp/evil",
        "-DCMAKE_CXX_ARCHIVE_CREATE=/tmp/evil",
    ]
    .into_iter()
    .enumerate()
    {
        let text = recipe(
            "/nonexistent/x.git",
            None,
            "",
            &format!("cmake_options = [{opt:?}]"),
        );
        let file = format!("opt-{k}.toml");
        let r = input(d, &file, &text);
        let var = opt[2..]
            .replace('"', "")
            .split(['=', ':'])
            .next()
            .unwrap()
            .trim()
            .to_owned();
        let name: &'static str =
            Box::leak(format!("class 5: cmake_options {opt} is refused").into_boxed_str());
        rows.push(row(
            name,
            &[&"build", &"--plan", &"--recipe", &r],
            2,
            &format!("error: {r}: invalid recipe: build.cmake_options entry {opt:?} sets {var}: "),
        ));
    }
    let text = recipe(
        "/nonexistent/x.git",
        Some(&"0".repeat(40)),
        "",
        "cmake_options = [\"-DCMAKE_SHARED_LINKER_FLAGS=-Xoffload-linker -mllvm=-amdgpu-s-branch-bits=12\", \"-DBUILD_TESTS=OFF\"]",
    );
    let r = input(d, "linker.toml", &text);
    let mut row_ = row(
        "class 5: cmake_options with linker flags and a project option still plans",
        &[&"build", &"--plan", &"--recipe", &r],
        0,
        "-DCMAKE_SHARED_LINKER_FLAGS=-Xoffload-linker",
    );
    row_.looked_in = In::Stdout;
    rows.push(row_);
    rows
}
