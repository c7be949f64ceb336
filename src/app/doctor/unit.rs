//! The systemd unit as `doctor` sees it: installed or not (either is fine: said as info), and
//! when installed, the settings of the shipped `deploy/personad.service` that the daemon
//! relies on (readiness and watchdog notifications, reload, private state) compared loosely
//! with it. Reads files only.

use std::path::{Path, PathBuf};

use super::Finding;

/// The unit file shipped with the project.
const SHIPPED: &str = include_str!("../../../deploy/personad.service");

/// The `[Service]` settings an installed unit should keep as shipped: the daemon notifies
/// readiness and its watchdog (`Type=notify`, `WatchdogSec`), reloads on SIGHUP, keeps its
/// state private.
const KEPT: [&str; 6] = [
    "Type",
    "NotifyAccess",
    "WatchdogSec",
    "ExecReload",
    "StateDirectoryMode",
    "UMask",
];

/// Where an installed unit is looked for: the system's, then the user's.
fn installed() -> Vec<PathBuf> {
    let mut paths = vec![PathBuf::from("/etc/systemd/system/personad.service")];
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
    if let Some(config) = config {
        paths.push(config.join("systemd/user/personad.service"));
    }
    paths
}

/// The unit check; `asked`: a unit file named on the command line instead.
pub(crate) fn check(asked: Option<&Path>) -> Vec<Finding> {
    let check = "systemd unit";
    let found = match asked {
        Some(p) => Some(p.to_path_buf()),
        None => installed().into_iter().find(|p| p.exists()),
    };
    let Some(path) = found else {
        return vec![Finding::info(
            check,
            "not installed (fine for a run by hand; to install it see docs/operations.md)",
        )];
    };
    let shown = path.display();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            return vec![Finding::warn(
                check,
                format!("cannot read {shown}: {e}"),
                "check its permissions",
            )];
        }
    };
    let differences = compare(&text);
    if differences.is_empty() {
        return vec![Finding::ok(
            check,
            format!("{shown} keeps the shipped settings ({})", KEPT.join(", ")),
        )];
    }
    vec![Finding::warn(
        check,
        format!(
            "{shown} differs from deploy/personad.service: {}",
            differences.join("; ")
        ),
        "install the shipped unit again (docs/operations.md), then systemctl daemon-reload",
    )]
}

/// The value of each `key=` line (the last one wins, as in systemd); comments skipped.
fn setting<'a>(unit: &'a str, key: &str) -> Option<&'a str> {
    unit.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.starts_with(';'))
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim())
        .next_back()
}

/// How `unit` departs from the shipped unit in the settings that matter.
fn compare(unit: &str) -> Vec<String> {
    let mut out = Vec::new();
    match setting(unit, "ExecStart") {
        Some(cmd) if cmd.contains("personad") && cmd.split_whitespace().any(|w| w == "run") => {}
        Some(cmd) => out.push(format!("ExecStart={cmd} does not run `personad run`")),
        None => out.push("no ExecStart".to_string()),
    }
    for key in KEPT {
        let shipped = setting(SHIPPED, key);
        let here = setting(unit, key);
        if here != shipped {
            out.push(format!(
                "{key}={} (shipped: {})",
                here.unwrap_or("unset"),
                shipped.unwrap_or("unset")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::compare;

    #[test]
    fn the_shipped_unit_matches_itself_and_a_changed_one_is_named() {
        assert!(compare(super::SHIPPED).is_empty());
        let changed = super::SHIPPED.replace("Type=notify", "Type=simple");
        let found = compare(&changed);
        assert_eq!(found, ["Type=simple (shipped: notify)"], "{found:?}");
        let no_watchdog = super::SHIPPED.replace("WatchdogSec=30\n", "");
        assert_eq!(compare(&no_watchdog), ["WatchdogSec=unset (shipped: 30)"]);
    }
}
