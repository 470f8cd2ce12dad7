//! The budget advisor: from the decision kinds that read each state table, the loosest
//! freshness budget that still serves every decision depending on it.
//!
//! A table's budget is what its freshness costs: commits (and the compactions and files they
//! bring) at the cadence [`Freshness::commit_interval`] sets. A decision input says how fresh
//! that decision needs the column; the table must serve the tightest need among its readers, and
//! anything tighter is spend no declared decision uses. A table no declared decision reads is
//! reported as such (its budget may serve readers the spec does not know of).

use std::time::Duration;

use crate::company::CompanySpec;
use crate::freshness::Freshness;

/// One decision input reading a table.
#[derive(Debug, Clone, PartialEq)]
pub struct Reader {
    pub kind: String,
    pub input: String,
    pub need: Freshness,
}

/// The advice for one state table.
#[derive(Debug, Clone, PartialEq)]
pub struct Advice {
    pub table: String,
    pub budget: Freshness,
    /// Every declared decision input that reads the table.
    pub readers: Vec<Reader>,
    /// The loosest budget serving every reader (the tightest need); `None` when no declared
    /// decision reads the table.
    pub recommended: Option<Freshness>,
    /// Commits an hour at the budget's cadence (at most; a table with no new events commits less).
    pub commits_per_hour: f64,
    /// Commits an hour at the recommended budget's cadence.
    pub recommended_commits_per_hour: Option<f64>,
}

impl Advice {
    /// `loosen` (the budget is tighter than any reader needs: spend saved by the recommendation),
    /// `tighten` (a reader needs it fresher than the budget: spend needed), `keep`, or `unread`.
    pub fn verdict(&self) -> &'static str {
        match self.recommended {
            None => "unread",
            Some(r) if r == self.budget => "keep",
            Some(r) if worst_lag(&r) > worst_lag(&self.budget) => "loosen",
            Some(r) if worst_lag(&r) < worst_lag(&self.budget) => "tighten",
            Some(_) => "keep",
        }
    }
}

/// The most lag a budget allows at any time: its duration, or a day for a nightly budget.
pub fn worst_lag(f: &Freshness) -> Duration {
    match f {
        Freshness::Within(d) => *d,
        Freshness::Nightly { .. } => Duration::from_secs(86_400),
    }
}

/// Commits an hour at a budget's cadence (a nightly budget commits once a day).
pub fn commits_per_hour(f: &Freshness) -> f64 {
    match f.commit_interval() {
        Some(i) => 3600.0 / i.as_secs_f64(),
        None => 1.0 / 24.0,
    }
}

/// The advice for every state table of `spec`, in declaration order.
pub fn advise(spec: &CompanySpec) -> Vec<Advice> {
    spec.tables
        .values()
        .map(|t| {
            let readers: Vec<Reader> = spec
                .decisions
                .values()
                .flat_map(|k| {
                    k.inputs.values().filter(|i| i.table == t.name).map(|i| Reader {
                        kind: k.name.clone(),
                        input: i.name.clone(),
                        need: i.need,
                    })
                })
                .collect();
            let recommended = readers.iter().map(|r| r.need).min_by_key(worst_lag);
            Advice {
                table: t.name.clone(),
                budget: t.freshness,
                commits_per_hour: commits_per_hour(&t.freshness),
                recommended_commits_per_hour: recommended.as_ref().map(commits_per_hour),
                recommended,
                readers,
            }
        })
        .collect()
}

/// The advice in words, one line per table (for `livestate tables --advise`).
pub fn describe(a: &Advice) -> String {
    let needs: Vec<String> =
        a.readers.iter().map(|r| format!("{}.{} needs {}", r.kind, r.input, r.need)).collect();
    match &a.recommended {
        None => format!(
            "{}: budget {}; no declared decision reads it (about {:.1} commits an hour)",
            a.table, a.budget, a.commits_per_hour
        ),
        Some(r) => {
            let rec = a.recommended_commits_per_hour.unwrap_or(0.0);
            let change = match a.verdict() {
                "loosen" => {
                    format!("loosen to {r}: saves about {:.1} commits an hour", a.commits_per_hour - rec)
                }
                "tighten" => format!(
                    "tighten to {r}: needs about {:.1} more commits an hour",
                    rec - a.commits_per_hour
                ),
                _ => "keep it".to_string(),
            };
            format!(
                "{}: budget {} (about {:.1} commits an hour); {}; {}",
                a.table,
                a.budget,
                a.commits_per_hour,
                change,
                needs.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(needs: &str) -> CompanySpec {
        let text = format!(
            r#"
[events."ops.seen"]
fields = {{ k = "string", n = "int" }}
[tables.fast]
primary_key = ["k"]
freshness = "5m"
columns = {{ k = "string", n = "int" }}
[tables.slow]
primary_key = ["k"]
freshness = "1s"
columns = {{ k = "string", n = "int" }}
[tables.alone]
primary_key = ["k"]
freshness = "1m"
columns = {{ k = "string", n = "int" }}
[decisions.dispatch]
module = "ops"
summary = "dispatch {{k}}"
action = {{ k = "string" }}
[decisions.dispatch.inputs.now]
table = "fast"
column = "n"
key = {{ k = "k" }}
need = "{fast_need}"
[decisions.plan]
module = "ops"
summary = "plan {{k}}"
action = {{ k = "string" }}
[decisions.plan.inputs.level]
table = "slow"
column = "n"
key = {{ k = "k" }}
need = "nightly@02:00"
[decisions.plan.inputs.other]
table = "fast"
column = "n"
key = {{ k = "k" }}
need = "1h"
"#,
            fast_need = needs
        );
        CompanySpec::from_sources(&[("s.toml".into(), text)]).unwrap()
    }

    fn of<'a>(advice: &'a [Advice], table: &str) -> &'a Advice {
        advice.iter().find(|a| a.table == table).unwrap()
    }

    #[test]
    fn a_table_read_by_a_seconds_decision_is_tightened_to_that_decisions_need() {
        let advice = advise(&spec("2s"));
        let fast = of(&advice, "fast");
        assert_eq!(fast.readers.len(), 2, "dispatch (2 s) and plan (1 h) read it");
        assert_eq!(fast.recommended, Some(Freshness::Within(Duration::from_secs(2))));
        assert_eq!(fast.verdict(), "tighten");
        // 5 min commits every 150 s (24 an hour); 2 s every 250 ms (14,400 an hour).
        assert_eq!(fast.commits_per_hour, 24.0);
        assert_eq!(fast.recommended_commits_per_hour, Some(14_400.0));
        assert!(describe(fast).contains("tighten to 2s: needs about 14376.0 more commits an hour"));
    }

    #[test]
    fn a_table_read_only_by_a_nightly_decision_is_loosened() {
        let advice = advise(&spec("2s"));
        let slow = of(&advice, "slow");
        assert_eq!(slow.recommended, Some("nightly@02:00".parse().unwrap()));
        assert_eq!(slow.verdict(), "loosen");
        assert_eq!(slow.commits_per_hour, 28_800.0, "1 s commits every 125 ms");
        assert!(describe(slow).contains("loosen to nightly@02:00: saves about 28800.0 commits an hour"));
    }

    #[test]
    fn a_table_no_decision_reads_is_marked_unread() {
        let advice = advise(&spec("2s"));
        let alone = of(&advice, "alone");
        assert_eq!((alone.recommended, alone.verdict()), (None, "unread"));
        assert!(describe(alone).contains("no declared decision reads it"));
    }

    #[test]
    fn a_budget_equal_to_what_its_decisions_need_is_kept() {
        assert_eq!(of(&advise(&spec("5m")), "fast").verdict(), "keep");
    }
}
