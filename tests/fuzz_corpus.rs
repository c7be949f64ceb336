//! The fuzz targets' inputs replayed on the normal test build: every seed under
//! `fuzz/seeds/<target>/` and every input a fuzz run once failed on, kept under
//! `fuzz/regressions/<target>/`, goes through the same entry point in `personad::fuzz`, so a
//! crash that was fixed stays fixed without a fuzzer installed. Then each committed input is
//! mutated a fixed number of times by a seeded generator (no coverage feedback, so the same
//! commit runs the same inputs on every machine: this is CI's deterministic fuzzing; the
//! open-ended search is `.ci/fuzz-scheduled`). Also checks that the fuzz crate builds exactly
//! the targets the library lists.

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

/// Mutations of each committed input per run (`PERSONAD_FUZZ_MUTATIONS` overrides).
const MUTATIONS: u64 = 2000;

/// splitmix64: a small, fixed generator, so every machine mutates alike.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % (n.max(1) as u64)).unwrap_or(0)
    }
}

/// Bytes that matter to the parsers: structure of Markdown, JSON and task blocks, UTF-8 and
/// UTF-16 edges, integer edges.
const INTERESTING: &[&[u8]] = &[
    b"\n",
    b"\r\n",
    b"#",
    b"# ",
    "«".as_bytes(),
    "»".as_bytes(),
    b"```",
    b"\"",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"-1",
    b"0",
    b"9223372036854775807",
    b"-9223372036854775808",
    b"1e308",
    b"NaN",
    b"\\u0000",
    "\u{1F600}".as_bytes(),
    "\u{200D}".as_bytes(),
    &[0xff],
    &[0xc3],
    &[0],
    b"@",
    b"null",
];

/// One seeded mutation of `input` (with `other`, an input of the same target, for splices).
fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(7) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 => {
                let piece = INTERESTING[rng.below(INTERESTING.len())];
                out.splice(at..at, piece.iter().copied());
            }
            2 if !out.is_empty() => {
                let end = (at + 1 + rng.below(32)).min(out.len());
                out.drain(at.min(end)..end);
            }
            3 if !out.is_empty() => {
                let from = rng.below(out.len());
                let end = (from + 1 + rng.below(64)).min(out.len());
                let copy = out[from..end].to_vec();
                out.splice(at..at, copy);
            }
            4 if !other.is_empty() => {
                let from = rng.below(other.len());
                let end = (from + 1 + rng.below(256)).min(other.len());
                out.splice(at..at, other[from..end].iter().copied());
            }
            5 => out.truncate(at),
            _ => {
                let b = u8::try_from(rng.next() & 0xff).unwrap_or(0);
                out.insert(at, b);
            }
        }
    }
    out
}

#[test]
fn seeded_mutations_of_every_committed_input_pass_their_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let per_input = std::env::var("PERSONAD_FUZZ_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MUTATIONS);
    let findings = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-findings");
    let mut failures = Vec::new();
    let mut ran = 0u64;
    for (t, (name, target)) in personad::fuzz::TARGETS.iter().enumerate() {
        let inputs: Vec<Vec<u8>> = files(&root.join("seeds").join(name))
            .iter()
            .chain(&files(&root.join("regressions").join(name)))
            .filter_map(|p| std::fs::read(p).ok())
            .collect();
        for (i, input) in inputs.iter().enumerate() {
            let mut rng = Rng(((t as u64) << 32) | i as u64);
            for n in 0..per_input {
                let other = &inputs[rng.below(inputs.len())];
                let data = mutate(&mut rng, input, other);
                ran += 1;
                if std::panic::catch_unwind(|| target(&data)).is_err() {
                    let path = findings.join(format!("{name}-{i}-{n}"));
                    let _ = std::fs::create_dir_all(&findings);
                    let _ = std::fs::write(&path, &data);
                    failures.push(path.display().to_string());
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "inputs that fail their target (replay one with its fuzz binary, then keep it in \
         fuzz/regressions/<target>/ with the fix): {failures:#?}"
    );
    assert!(ran >= per_input * personad::fuzz::TARGETS.len() as u64);
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

/// The journal seeds that are segments (`.log`) hold records, so the reader's checks run on
/// real records, not only on garbage.
#[test]
fn the_journal_seeds_hold_records() {
    use personad::adapters::store::journal::parse;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/journal");
    let mut segments = 0;
    for path in files(&dir) {
        if path.extension().is_some_and(|e| e == "log") {
            let parsed = parse(&std::fs::read(&path).unwrap_or_default(), None);
            assert!(!parsed.records.is_empty(), "{}: {parsed:?}", path.display());
            segments += 1;
        }
    }
    assert!(segments >= 4);
    let valid = parse(
        &std::fs::read(dir.join("valid.log")).unwrap_or_default(),
        None,
    );
    assert!(
        valid.torn.is_none() && valid.skipped.is_empty(),
        "{valid:?}"
    );
    assert_eq!(valid.records.len(), 5);
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

/// The fuzz crate's lock file agrees with the project's dependencies: CI builds the fuzz
/// targets with `--locked`, which refuses a lock file that a new dependency left stale. Offline:
/// `cargo metadata` only reads the manifests, the lock file and the local registry; where the
/// fuzz crate's own dependencies are not downloaded yet it says SKIPPED.
#[test]
fn the_fuzz_lock_file_is_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--locked", "--offline", "--format-version", "1"])
        .current_dir(&root)
        .output();
    let Ok(out) = out else {
        panic!("cargo metadata did not run in {}", root.display());
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("cannot update the lock file"),
        "fuzz/Cargo.lock is stale (run `cargo update --workspace --offline` in fuzz/): {stderr}"
    );
    if !out.status.success() {
        // The fuzz crate's own dependencies are not downloaded yet (a fresh machine before its
        // first fuzz build): the lock could not be compared.
        eprintln!("SKIPPED: the fuzz crate's dependencies are not here yet: {stderr}");
    }
}
