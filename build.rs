//! Embeds every `recipes/*.toml`, every `patches/*.patch`, every `recipes/records/*/manifest.json`
//! (and `recipes/rcclfix.lock` when present)
//! into the binary, so
//! `rcclfix build` works from an installed binary with no checkout.

use std::fmt::Write;

fn main() {
    println!("cargo:rerun-if-changed=recipes");
    let mut files: Vec<_> = std::fs::read_dir("recipes")
        .expect("recipes/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    let mut out = String::from("/// Every `recipes/*.toml` at build time: (file name, contents).\npub static EMBEDDED_RECIPES: &[(&str, &str)] = &[\n");
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let abs = std::fs::canonicalize(f).unwrap();
        writeln!(
            out,
            "    ({:?}, include_str!({:?})),",
            f.file_name().unwrap().to_str().unwrap(),
            abs
        )
        .unwrap();
    }
    out.push_str("];\n");
    let lock = std::path::Path::new("recipes/rcclfix.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    if lock.exists() {
        let abs = std::fs::canonicalize(lock).unwrap();
        writeln!(out, "/// `recipes/rcclfix.lock` at build time.\npub static EMBEDDED_LOCK: &str = include_str!({abs:?});").unwrap();
    } else {
        out.push_str("/// `recipes/rcclfix.lock` at build time (absent).\npub static EMBEDDED_LOCK: &str = \"\";\n");
    }
    // Every `patches/*.patch`, so recipes that name patches build from an installed binary too.
    println!("cargo:rerun-if-changed=patches");
    let mut patches: Vec<_> = std::fs::read_dir("patches")
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    patches.retain(|p: &std::path::PathBuf| p.extension().is_some_and(|e| e == "patch"));
    patches.sort();
    out.push_str("/// Every `patches/*.patch` at build time: (file name, contents).\npub static EMBEDDED_PATCHES: &[(&str, &str)] = &[\n");
    for f in &patches {
        println!("cargo:rerun-if-changed={}", f.display());
        let abs = std::fs::canonicalize(f).unwrap();
        writeln!(
            out,
            "    ({:?}, include_str!({:?})),",
            f.file_name().unwrap().to_str().unwrap(),
            abs
        )
        .unwrap();
    }
    out.push_str("];\n");
    // Every `recipes/records/<folder>/manifest.json`: the toolchain package versions a verified
    // recipe was recorded with, compared by `build` against the toolchain it runs in.
    println!("cargo:rerun-if-changed=recipes/records");
    let mut records: Vec<_> = std::fs::read_dir("recipes/records")
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    records.retain(|p: &std::path::PathBuf| p.join("manifest.json").is_file());
    records.sort();
    out.push_str("/// Every `recipes/records/*/manifest.json` at build time: (folder name, contents).\npub static EMBEDDED_RECORD_MANIFESTS: &[(&str, &str)] = &[\n");
    for d in &records {
        let f = d.join("manifest.json");
        println!("cargo:rerun-if-changed={}", f.display());
        let abs = std::fs::canonicalize(&f).unwrap();
        writeln!(
            out,
            "    ({:?}, include_str!({:?})),",
            d.file_name().unwrap().to_str().unwrap(),
            abs
        )
        .unwrap();
    }
    out.push_str("];\n");
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("recipes.rs");
    std::fs::write(dest, out).unwrap();
}
