//! Command-line contract shared by every subcommand: a closed stdout keeps the exit code and
//! prints nothing about it (more cases, stderr closed too: `tests/it/hostile_scan.rs`).

use std::process::Stdio;

/// Run `rcclfix ARGS` with stdout a pipe whose read end is closed before the child starts, so
/// every write to stdout meets `EPIPE` (deterministic, unlike `| head`).
fn with_closed_stdout(args: &[&str]) -> std::process::Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    crate::support::rcclfix()
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("RUST_LOG")
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn closed_stdout_keeps_the_exit_code_quietly_in_every_printing_subcommand() {
    for (args, code) in [
        (&["matrix"][..], 0),
        (&["matrix", "--json"], 0),
        (&["build", "--list"], 0),
        (&["recipe", "list"], 0),
        (&["recipe", "show", "2.13.4"], 0),
        // A declaring fixture: the verdict is 1 whether or not anyone reads the table.
        (&["scan", "tests/fixtures/sid/kernels.so"], 1),
        (&["scan", "--json", "tests/fixtures/sid/kernels.so"], 1),
        (&["scan", "tests/fixtures/sid/implicit.so"], 0),
        (
            &[
                "scan",
                "--target",
                "gfx1030",
                "tests/fixtures/sid/implicit.so",
            ],
            3,
        ),
        (&["patch", "--help"], 0),
    ] {
        let o = with_closed_stdout(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(code),
            "{args:?}: {:?} {err}",
            o.status
        );
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{args:?}: {err}"
        );
    }
}
