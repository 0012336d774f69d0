//! What a replay of a team's run checks besides its members' runs: each report's passage
//! through the firewall, as recorded, against what the team's firewall decides now
//! ([`recheck_firewall`]).
//!
//! A report's record (`report_received` evidence) says whether it was withheld and, for a
//! typed report, the fields that passed and those withheld: together, every field the
//! member gave. That is enough to decide again without the report's content.

use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt;
use troupe_team::ContextFirewall;

/// How the firewall treated one report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ReportPassage {
    /// It did not pass: no channel from its member to its recipient.
    Withheld,
    /// It passed, without these fields of a typed report (none: whole).
    Passed {
        /// The fields withheld, by name.
        without: Vec<String>,
    },
}

impl fmt::Display for ReportPassage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportPassage::Withheld => f.write_str("withheld (no channel)"),
            ReportPassage::Passed { without } if without.is_empty() => f.write_str("passed whole"),
            ReportPassage::Passed { without } => {
                let fields: Vec<String> = without.iter().map(|w| format!("`{w}`")).collect();
                write!(f, "passed without {}", fields.join(", "))
            }
        }
    }
}

/// A report the firewall now treats otherwise than it did when the run was recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FirewallChange {
    /// The member that reported.
    pub member: String,
    /// Its recipient.
    pub to: String,
    /// The task it reported on.
    pub task_id: String,
    /// What the firewall did then.
    pub recorded: ReportPassage,
    /// What it does now.
    pub now: ReportPassage,
}

impl fmt::Display for FirewallChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the report of {} to {} ({}): - recorded: {}; + now: {}",
            self.member, self.to, self.task_id, self.recorded, self.now
        )
    }
}

/// Each recorded report (the payloads of a team run's `report_received` evidence, in
/// order) that `firewall` now treats otherwise. A report that passed no firewall (the
/// leader's answer, a parallel team's members') is skipped.
pub fn recheck_firewall<'a>(
    firewall: &ContextFirewall,
    reports: impl IntoIterator<Item = &'a Value>,
) -> Vec<FirewallChange> {
    let mut changes = Vec::new();
    for report in reports {
        let text = |key: &str| report[key].as_str().unwrap_or_default().to_owned();
        let (member, to) = (text("member"), text("to"));
        // Records made before reports said so: the team's caller is no member.
        let through_firewall = report["firewall"].as_bool().unwrap_or(to != "user");
        if member.is_empty() || to.is_empty() || !through_firewall {
            continue;
        }
        let withheld_fields: Vec<String> = report["withheld_fields"]
            .as_array()
            .map(|fields| fields.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        let recorded = match report["withheld"].as_bool() {
            Some(true) => ReportPassage::Withheld,
            _ => ReportPassage::Passed { without: sorted(withheld_fields.clone()) },
        };
        let now = if !firewall.allows(&member, &to) {
            ReportPassage::Withheld
        } else {
            // Every field the member gave: those that passed and those withheld.
            let given: BTreeSet<String> = report["structured"]
                .as_object()
                .map(|o| o.keys().cloned().collect::<BTreeSet<_>>())
                .unwrap_or_default()
                .into_iter()
                .chain(withheld_fields)
                .collect();
            let without = match firewall.carried_fields(&member, &to) {
                Some(carried) => given.into_iter().filter(|f| !carried.contains(f)).collect(),
                None => Vec::new(),
            };
            ReportPassage::Passed { without }
        };
        if now != recorded {
            changes.push(FirewallChange { member, to, task_id: text("task_id"), recorded, now });
        }
    }
    changes
}

fn sorted(mut fields: Vec<String>) -> Vec<String> {
    fields.sort();
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(withheld: bool, structured: Value, withheld_fields: &[&str]) -> Value {
        json!({"member": "researcher", "to": "lead", "task_id": "t1", "withheld": withheld,
               "structured": structured, "withheld_fields": withheld_fields})
    }

    #[test]
    fn the_same_firewall_decides_the_same() {
        let firewall =
            ContextFirewall::new().channel("researcher", "lead").report_fields("researcher", "lead", ["summary"]);
        let recorded = report(false, json!({"summary": "s"}), &["artifacts", "blockers"]);
        assert_eq!(recheck_firewall(&firewall, [&recorded]), Vec::new());
        let text = json!({"member": "researcher", "to": "lead", "task_id": "t1", "withheld": false, "report": "r"});
        assert_eq!(recheck_firewall(&firewall, [&text]), Vec::new());
        let parallel = json!({"member": "a", "to": "user", "withheld": false, "firewall": false});
        let leader = json!({"member": "lead", "to": "user", "withheld": false});
        assert_eq!(recheck_firewall(&ContextFirewall::new(), [&parallel, &leader]), Vec::new());
    }

    #[test]
    fn a_field_now_carried_or_a_channel_now_closed_is_a_change() {
        let recorded = report(false, json!({"summary": "s"}), &["artifacts"]);
        let whole = ContextFirewall::new().channel("researcher", "lead");
        let changes = recheck_firewall(&whole, [&recorded]);
        assert_eq!(changes.len(), 1);
        assert_eq!(
            changes[0].to_string(),
            "the report of researcher to lead (t1): - recorded: passed without `artifacts`; + now: passed whole"
        );
        let closed = ContextFirewall::new();
        let changes = recheck_firewall(&closed, [&recorded]);
        assert_eq!(changes[0].now, ReportPassage::Withheld);
        let dropped =
            json!({"member": "researcher", "to": "lead", "task_id": "t1", "withheld": true, "report": "[firewall] …"});
        let changes = recheck_firewall(&whole, [&dropped]);
        assert_eq!(
            (changes[0].recorded.clone(), changes[0].now.clone()),
            (ReportPassage::Withheld, ReportPassage::Passed { without: vec![] })
        );
    }
}
