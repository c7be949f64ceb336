//! The deployment files' invariants, checked without network or a cluster (deploy/validate
//! checks them against the Kubernetes schemas and hadolint in CI): the StatefulSet runs each
//! pod as the shard its ordinal names, with the systemd unit's hardening, `/healthz` probes
//! and a grace period longer than the daemon's stop grace; every file a kustomization lists
//! exists; the template unit passes `--shard %i/` and keeps the unit's hardening; the
//! Dockerfile builds as CI does. The files are read as text (no YAML parser in the tree).

use std::fs;
use std::path::{Path, PathBuf};

use clap::Parser;
use personad::app::cli::{Cli, Command};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The lines nested under each line whose trimmed text is `key` (a YAML mapping key such as
/// `livenessProbe:`), one block per occurrence.
fn blocks(text: &str, key: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start().trim_start_matches("- ");
        if t != key {
            continue;
        }
        let depth = indent(line);
        let body: Vec<&str> = lines[i + 1..]
            .iter()
            .take_while(|l| l.trim().is_empty() || indent(l) > depth)
            .copied()
            .collect();
        out.push(body.join("\n"));
    }
    out
}

/// The value of `key: value` lines (comments and quotes dropped), every occurrence.
fn values(text: &str, key: &str) -> Vec<String> {
    let prefix = format!("{key}:");
    text.lines()
        .map(|l| l.trim_start().trim_start_matches("- "))
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|v| {
            v.split(" #")
                .next()
                .unwrap_or("")
                .trim()
                .trim_matches('"')
                .to_string()
        })
        .collect()
}

/// The values of `Key=value` lines (a unit file) or `key = "value"` lines (Cargo.toml).
fn assignments(text: &str, key: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix(key))
        .filter_map(|rest| rest.trim_start().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"').to_string())
        .collect()
}

/// The value of an environment variable the manifest sets (`- name: N` then `value: V`).
fn env_value(text: &str, name: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim() == format!("- name: {name}"))?;
    values(lines.get(at + 1)?, "value").into_iter().next()
}

const STATEFULSET: &str = "deploy/kubernetes/statefulset.yaml";

#[test]
fn each_pod_runs_the_shard_its_ordinal_names_with_n_equal_to_replicas() {
    let sts = read(STATEFULSET);
    let command: Vec<&str> = sts
        .lines()
        .filter(|l| l.contains("/usr/local/bin/personad run"))
        .collect();
    assert_eq!(command.len(), 1, "one container command runs the daemon");
    assert!(
        command[0].contains(r#"--shard "${HOSTNAME##*-}/${PERSONAD_SHARDS}""#),
        "the pod's ordinal and PERSONAD_SHARDS make --shard: {}",
        command[0]
    );
    let replicas = values(&sts, "replicas");
    let shards = env_value(&sts, "PERSONAD_SHARDS");
    assert_eq!(replicas.len(), 1);
    assert_eq!(
        Some(replicas[0].clone()),
        shards,
        "PERSONAD_SHARDS equals replicas"
    );
    assert!(sts.contains("kind: StatefulSet") && sts.contains("volumeClaimTemplates:"));
}

#[test]
fn the_pod_has_the_systemd_units_hardening() {
    let sts = read(STATEFULSET);
    let contexts = blocks(&sts, "securityContext:");
    assert_eq!(contexts.len(), 2, "one for the pod, one for the container");
    let (pod, container) = (&contexts[0], &contexts[1]);
    for ctx in [pod, container] {
        assert_eq!(values(ctx, "runAsNonRoot"), ["true"], "{ctx}");
        assert!(ctx.contains("seccompProfile:") && values(ctx, "type") == ["RuntimeDefault"]);
    }
    assert_eq!(values(container, "readOnlyRootFilesystem"), ["true"]);
    assert_eq!(values(container, "allowPrivilegeEscalation"), ["false"]);
    assert_eq!(values(container, "privileged"), ["false"]);
    assert_eq!(values(container, "drop"), [r#"["ALL"]"#]);
    // The image's user is the one the pod runs as.
    let uid = values(pod, "runAsUser");
    assert_eq!(uid.len(), 1);
    let docker = read("Dockerfile");
    assert!(
        docker.contains(&format!("\nUSER {0}:{0}\n", uid[0])),
        "the Dockerfile's USER is {}",
        uid[0]
    );
    assert_eq!(values(&sts, "automountServiceAccountToken"), ["false"]);
}

#[test]
fn the_probes_ask_healthz_on_the_metrics_port_the_daemon_serves() {
    let sts = read(STATEFULSET);
    for probe in ["startupProbe:", "livenessProbe:", "readinessProbe:"] {
        let found = blocks(&sts, probe);
        assert_eq!(found.len(), 1, "{probe}");
        assert_eq!(values(&found[0], "path"), ["/healthz"], "{probe}");
        assert_eq!(values(&found[0], "port"), ["metrics"], "{probe}");
    }
    let addr = env_value(&sts, "PERSONAD_METRICS_ADDR").unwrap_or_default();
    let port = addr.rsplit(':').next().unwrap_or_default().to_string();
    assert!(values(&sts, "containerPort").contains(&port), "{addr}");
    assert_eq!(values(&sts, "prometheus.io/port"), [port]);
    assert!(values(&read("deploy/kubernetes/service.yaml"), "clusterIP").contains(&"None".into()));
    let monitor = read("deploy/kubernetes/monitoring/servicemonitor.yaml");
    assert_eq!(values(&monitor, "port"), ["metrics"]);
}

#[test]
fn the_grace_period_covers_the_daemons_graceful_stop() {
    let sts = read(STATEFULSET);
    let grace: u64 = values(&sts, "terminationGracePeriodSeconds")
        .first()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("terminationGracePeriodSeconds is set"));
    let set: u64 = env_value(&sts, "PERSONAD_SHUTDOWN_GRACE_SECS")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("the manifest sets PERSONAD_SHUTDOWN_GRACE_SECS"));
    let Ok(Cli {
        command: Command::Run(run),
        ..
    }) = Cli::try_parse_from(["personad", "run"])
    else {
        panic!("`personad run` parses");
    };
    // The daemon's stop: the tasks' grace, then saving and disconnecting (10 s margin at least).
    for daemon_grace in [set, run.shutdown_grace_secs] {
        assert!(
            grace >= daemon_grace + 10,
            "terminationGracePeriodSeconds {grace} leaves no margin after {daemon_grace} s"
        );
    }
}

/// The entries of a kustomization's `resources:` and `components:` lists.
fn listed(kustomization: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in kustomization.lines() {
        if !line.starts_with(' ') && !line.starts_with('-') {
            inside = line == "resources:" || line == "components:";
            continue;
        }
        if let (true, Some(entry)) = (inside, line.trim().strip_prefix("- ")) {
            out.push(entry.to_string());
        }
    }
    out
}

#[test]
fn every_file_a_kustomization_lists_exists_and_no_placeholder_secret_is_applied() {
    for dir in ["deploy/kubernetes", "deploy/kubernetes/monitoring"] {
        let kustomization = read(&format!("{dir}/kustomization.yaml"));
        let entries = listed(&kustomization);
        assert!(!entries.is_empty(), "{dir} lists resources");
        for entry in entries {
            assert!(
                Path::new(&root().join(dir).join(&entry)).exists(),
                "{dir}/kustomization.yaml lists {entry}, which does not exist"
            );
        }
    }
    let base = listed(&read("deploy/kubernetes/kustomization.yaml"));
    for name in [
        "statefulset.yaml",
        "service.yaml",
        "poddisruptionbudget.yaml",
        "personas.yaml",
    ] {
        assert!(base.contains(&name.to_string()), "{name} is applied");
    }
    // The ServiceMonitor needs the Prometheus operator's CRD: opt-in. The example Secret and
    // the maintenance pod are never applied with the rest.
    for name in [
        "monitoring",
        "servicemonitor.yaml",
        "secret.example.yaml",
        "maintenance-pod.yaml",
    ] {
        assert!(
            !base.contains(&name.to_string()),
            "{name} is not applied by default"
        );
    }
    let secret = read("deploy/kubernetes/secret.example.yaml");
    for value in values(&secret, "telegram_api_hash")
        .into_iter()
        .chain(values(&secret, "gemini_api_key"))
    {
        assert!(value.starts_with("REPLACE-ME"), "a placeholder: {value}");
    }
}

#[test]
fn the_template_unit_runs_shard_i_of_n_with_the_units_hardening() {
    let unit = read("deploy/systemd/personad@.service");
    let exec = assignments(&unit, "ExecStart");
    assert_eq!(
        exec,
        ["/usr/local/bin/personad run --shard %i/${PERSONAD_SHARDS}"]
    );
    assert_eq!(assignments(&unit, "StateDirectory"), ["personad/%i"]);
    assert!(unit.contains("\nEnvironment=PERSONAD_STATE_DIR=/var/lib/personad/%i\n"));
    assert!(unit.contains("\nEnvironmentFile=/etc/personad/shards.env\n"));
    // Every line of the single unit's hardening section is in the template too.
    let single = read("deploy/personad.service");
    let hardening = single
        .split("# Hardening.\n")
        .nth(1)
        .and_then(|rest| rest.split("\n[Install]").next())
        .unwrap_or_else(|| panic!("deploy/personad.service has a hardening section"));
    for line in hardening
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        assert!(
            unit.lines().any(|l| l == line),
            "the template lacks `{line}`"
        );
    }
    for line in [
        "User=personad",
        "UMask=0077",
        "StateDirectoryMode=0700",
        "Type=notify",
    ] {
        assert!(
            unit.lines().any(|l| l == line),
            "the template lacks `{line}`"
        );
    }
}

#[test]
fn the_dockerfile_builds_as_ci_does_and_runs_unprivileged() {
    let docker = read("Dockerfile");
    let cargo = read("Cargo.toml");
    let rust_version = assignments(&cargo, "rust-version");
    assert_eq!(rust_version.len(), 1, "Cargo.toml names its rust-version");
    let pinned = assignments(&docker, "ARG RUST_VERSION");
    assert!(
        pinned.len() == 1 && pinned[0].starts_with(&format!("{}.", rust_version[0])),
        "the build image {pinned:?} is the toolchain of rust-version {rust_version:?}"
    );
    assert!(docker.contains("cargo build --release --locked"));
    // The library .ci/run installs for the build, and its runtime part.
    assert!(read(".ci/run").contains("libopus-dev") && docker.contains("libopus-dev"));
    assert!(docker.contains("libopus0") && docker.contains("ca-certificates"));
    assert!(docker.contains(r#"ENTRYPOINT ["/usr/local/bin/personad"]"#));
    let ignore = read(".dockerignore");
    for entry in ["target/", "state/", ".git/"] {
        assert!(
            ignore.lines().any(|l| l == entry),
            ".dockerignore lacks {entry}"
        );
    }
}
