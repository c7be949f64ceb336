//! The fuzz targets' inputs replayed on the normal test build: every seed under
//! `fuzz/seeds/<target>/` and every input a fuzz run once failed on, kept under
//! `fuzz/regressions/<target>/`, goes through the same entry point in `personad::fuzz`, so a
//! crash that was fixed stays fixed without a fuzzer installed. Also checks that the fuzz
//! crate builds exactly the targets the library lists.

use std::path::{Path, PathBuf};

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

#[test]
fn every_seed_and_past_crash_passes_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut failures = Vec::new();
    let mut ran = 0;
    for (name, target) in personad::fuzz::TARGETS {
        let seeds = files(&root.join("seeds").join(name));
        assert!(!seeds.is_empty(), "fuzz/seeds/{name} has no seeds");
        for path in seeds
            .iter()
            .chain(&files(&root.join("regressions").join(name)))
        {
            let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            ran += 1;
            if std::panic::catch_unwind(|| target(&bytes)).is_err() {
                failures.push(path.display().to_string());
            }
        }
    }
    assert!(failures.is_empty(), "failing inputs: {failures:#?}");
    assert!(ran >= personad::fuzz::TARGETS.len());
}

#[test]
fn the_graph_seeds_load_so_the_round_trip_is_checked() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/graph_codec");
    for path in files(&dir) {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if let Err(e) = personad::core::graph::codec::decode(&text) {
            panic!("{} does not load: {e}", path.display());
        }
    }
}

#[test]
fn the_fuzz_crate_builds_exactly_the_listed_targets() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    let mut in_manifest: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|n| *n != "personad-fuzz")
        .collect();
    in_manifest.sort_unstable();
    let mut listed: Vec<&str> = personad::fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
    listed.sort_unstable();
    assert_eq!(in_manifest, listed);
    for name in listed {
        let source = std::fs::read_to_string(root.join(format!("fuzz_targets/{name}.rs")))
            .unwrap_or_default();
        assert!(
            source.contains("personad::fuzz::"),
            "fuzz_targets/{name}.rs does not call its entry point"
        );
    }
}

#[test]
fn the_telegram_seeds_decode_and_their_messages_map() {
    use personad::adapters::mtproto::map::{MapContext, SerializedMapping, map_serialized};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/telegram");
    let ctx = MapContext {
        self_id: 1000,
        self_username: Some("personabot".into()),
    };
    let mut messages = 0;
    for path in files(&dir) {
        let bytes = std::fs::read(&path).unwrap_or_default();
        match map_serialized(&bytes, &ctx) {
            Some(SerializedMapping::Message { mapped, .. }) => {
                assert!(mapped.is_ok(), "{}: {mapped:?}", path.display());
                messages += 1;
            }
            Some(SerializedMapping::Update(deleted)) => assert!(deleted.is_some()),
            None => panic!(
                "{} decodes as neither a message nor an update",
                path.display()
            ),
        }
    }
    assert!(messages >= 3);
}
