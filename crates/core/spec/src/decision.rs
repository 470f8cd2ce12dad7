//! Decision kinds (`[decisions.KIND]`): the numbers a decision looks at, where each comes from,
//! how fresh this decision needs it, the rule's arithmetic over them and the action in words.
//!
//! A [`DecisionKind`] is checked when the spec loads: every input names a real column of a real
//! table, its key gives exactly the table's primary key from declared action fields of fitting
//! types, its `need` is a freshness, every rule step type-checks over the inputs and the steps
//! before it, and every `{name}` of the summary template is an action field, an input or a step.

use std::path::Path;

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Map;

use crate::company::{valid_name, TableSpec};
use crate::error::Problem;
use crate::expr::{Expr, ExprType};
use crate::freshness::Freshness;
use crate::types::{Value, ValueType};

/// Most inputs and rule steps a decision kind may declare, each.
pub const MAX_DECISION_ITEMS: usize = 64;

/// A checked decision kind.
#[derive(Debug, Clone)]
pub struct DecisionKind {
    pub name: String,
    pub description: Option<String>,
    /// The module that carries an approved decision out (proposals of this kind name it).
    pub module: String,
    /// The action in words: `{name}` is replaced by an action field, an input or a rule step.
    pub summary: String,
    /// The action's fields and their types; a proposal's action must hold each.
    pub action: IndexMap<String, ValueType>,
    /// The numbers the decision looks at, in declaration order.
    pub inputs: IndexMap<String, DecisionInput>,
    /// The rule's arithmetic: named expressions over the inputs and earlier steps, in order.
    pub rule: Vec<RuleStep>,
}

/// One number a decision looks at.
#[derive(Debug, Clone)]
pub struct DecisionInput {
    pub name: String,
    pub table: String,
    pub column: String,
    pub column_type: ValueType,
    /// The table's key columns in key order, each with the action field holding its value.
    pub key: Vec<(String, String)>,
    /// How fresh this decision needs the number (may differ from the table's budget).
    pub need: Freshness,
}

/// One step of a rule's arithmetic: `name = expression`.
#[derive(Debug, Clone)]
pub struct RuleStep {
    pub name: String,
    /// The expression as written.
    pub text: String,
    pub expr: Expr,
}

/// A step evaluated: the expression with the numbers in it, and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    pub name: String,
    pub text: String,
    /// The expression with every name replaced by its value (`40 - 5 + 12`).
    pub with_values: String,
    /// The value, or why it could not be computed (an overflow, a division by zero).
    pub value: Result<Value, String>,
}

impl DecisionKind {
    /// The key an input is read by, from a proposal's action: each key column with its value.
    ///
    /// # Errors
    /// A message naming the action field that is missing or does not fit the key column.
    pub fn input_key(
        &self,
        input: &DecisionInput,
        action: &Map<String, serde_json::Value>,
    ) -> Result<Vec<(String, Value)>, String> {
        input
            .key
            .iter()
            .map(|(column, field)| {
                let ty = self.action[field.as_str()];
                let json = action.get(field).ok_or_else(|| format!("the action has no field `{field}`"))?;
                let v = Value::from_json(json, ty).map_err(|e| format!("action.{field}: {e}"))?;
                Ok((column.clone(), v))
            })
            .collect()
    }

    /// Checks that `action` holds every declared field with a value of its type.
    ///
    /// # Errors
    /// A message naming the first field missing or of the wrong type.
    pub fn check_action(&self, action: &Map<String, serde_json::Value>) -> Result<(), String> {
        for (field, ty) in &self.action {
            match action.get(field) {
                None | Some(serde_json::Value::Null) => {
                    return Err(format!("action.{field}: missing; kind `{}` needs it ({ty})", self.name))
                }
                Some(v) => {
                    Value::from_json(v, *ty).map_err(|e| format!("action.{field}: {e}"))?;
                }
            }
        }
        Ok(())
    }

    /// Evaluates the rule's steps in order, reading inputs (and action fields) through `lookup`.
    pub fn evaluate(&self, lookup: &dyn Fn(&str) -> Option<Value>) -> Vec<StepResult> {
        let mut done: Vec<(String, Value)> = Vec::new();
        let mut out = Vec::new();
        for step in &self.rule {
            let find =
                |n: &str| done.iter().find(|(d, _)| d == n).map(|(_, v)| v.clone()).or_else(|| lookup(n));
            let value = step.expr.eval(&find);
            let with_values = with_values(&step.text, &find);
            done.push((step.name.clone(), value.clone().unwrap_or(Value::Null)));
            out.push(StepResult { name: step.name.clone(), text: step.text.clone(), with_values, value });
        }
        out
    }

    /// The summary template with every `{name}` replaced through `lookup` (`?` when unknown).
    pub fn render_summary(&self, lookup: &dyn Fn(&str) -> Option<String>) -> String {
        let mut out = String::new();
        let mut rest = self.summary.as_str();
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let Some(close) = rest[open..].find('}') else { break };
            let name = &rest[open + 1..open + close];
            out.push_str(&lookup(name).unwrap_or_else(|| "?".into()));
            rest = &rest[open + close + 1..];
        }
        out.push_str(rest);
        out
    }
}

/// The `{name}` placeholders of a summary template.
///
/// # Errors
/// A `{` without its `}`, or an empty or nested placeholder.
pub fn template_names(template: &str) -> Result<Vec<&str>, String> {
    let mut names = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return Err(format!("`{{` without its `}}` in `{template}`"));
        };
        let name = &rest[open + 1..open + close];
        if name.is_empty() || name.contains('{') {
            return Err(format!("an empty or nested `{{...}}` in `{template}`"));
        }
        names.push(name);
        rest = &rest[open + close + 1..];
    }
    if rest.contains('}') {
        return Err(format!("`}}` without its `{{` in `{template}`"));
    }
    Ok(names)
}

/// `text` with every name (a letter or `_`, then letters, digits, `_` and `.`) that `lookup`
/// knows replaced by its value; text in quotes is left alone, strings are quoted.
pub fn with_values(text: &str, lookup: &dyn Fn(&str) -> Option<Value>) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            let end = chars[i + 1..].iter().position(|&x| x == '\'').map_or(chars.len(), |p| i + 2 + p);
            out.extend(&chars[i..end]);
            i = end;
        } else if c.is_ascii_alphabetic() || c == '_' || c == '$' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | '.' | '$'))
            {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect();
            match lookup(&name) {
                Some(Value::String(s)) => out.push_str(&format!("'{s}'")),
                Some(v) => out.push_str(&v.to_string()),
                None => out.push_str(&name),
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDecision {
    description: Option<String>,
    module: String,
    summary: String,
    #[serde(default)]
    action: IndexMap<String, String>,
    inputs: IndexMap<String, RawInput>,
    #[serde(default)]
    rule: IndexMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawInput {
    table: String,
    column: String,
    /// Key column → the action field holding its value.
    key: IndexMap<String, String>,
    need: String,
}

/// Checks one `[decisions.NAME]` against the tables and modules; every problem goes to `problems`.
pub(crate) fn check(
    file: &Path,
    name: &str,
    raw: RawDecision,
    tables: &IndexMap<String, TableSpec>,
    modules: &[&str],
    problems: &mut Vec<Problem>,
) -> Option<DecisionKind> {
    let before = problems.len();
    let at = format!("decisions.{name}");
    let mut problem = |at: String, message: String| {
        problems.push(Problem { file: file.to_path_buf(), at, message });
    };
    if !valid_name(name) {
        problem(
            at.clone(),
            "a decision kind's name is lowercase letters, digits and `_`, starting with a letter".into(),
        );
    }
    if !modules.contains(&raw.module.as_str()) {
        problem(
            format!("{at}.module"),
            format!("`{}` is not a module of this company (modules: {})", raw.module, modules.join(", ")),
        );
    }
    if raw.inputs.is_empty() {
        problem(
            format!("{at}.inputs"),
            "a decision kind declares the numbers it looks at: at least one input".into(),
        );
    }
    if raw.inputs.len() > MAX_DECISION_ITEMS || raw.rule.len() > MAX_DECISION_ITEMS {
        problem(
            at.clone(),
            format!("at most {MAX_DECISION_ITEMS} inputs and {MAX_DECISION_ITEMS} rule steps"),
        );
    }
    let mut action = IndexMap::new();
    for (field, ty) in &raw.action {
        if !valid_name(field) {
            problem(format!("{at}.action.{field}"), "action field names are lower_snake_case".into());
        }
        match ty.parse::<ValueType>() {
            Ok(t) => {
                action.insert(field.clone(), t);
            }
            Err(e) => problem(format!("{at}.action.{field}"), e),
        }
    }
    let mut inputs = IndexMap::new();
    for (input, ri) in raw.inputs {
        let iat = format!("{at}.inputs.{input}");
        if !valid_name(&input) {
            problem(iat.clone(), "input names are lower_snake_case".into());
        }
        if action.contains_key(&input) {
            problem(iat.clone(), format!("`{input}` is also an action field; give the input another name"));
        }
        let need = match ri.need.parse::<Freshness>() {
            Ok(f) => Some(f),
            Err(e) => {
                problem(format!("{iat}.need"), e);
                None
            }
        };
        let Some(table) = tables.get(&ri.table) else {
            problem(format!("{iat}.table"), format!("unknown table `{}`", ri.table));
            continue;
        };
        let Some(&column_type) = table.columns.get(&ri.column) else {
            problem(
                format!("{iat}.column"),
                format!(
                    "table `{}` has no column `{}` (columns: {})",
                    table.name,
                    ri.column,
                    join(table.columns.keys())
                ),
            );
            continue;
        };
        let mut given: Vec<&String> = ri.key.keys().collect();
        given.sort();
        let mut wanted: Vec<&String> = table.primary_key.iter().collect();
        wanted.sort();
        if given != wanted {
            problem(
                format!("{iat}.key"),
                format!(
                    "give exactly the key columns of `{}` ({}), each with the action field holding its value",
                    table.name,
                    table.primary_key.join(", ")
                ),
            );
            continue;
        }
        let mut key = Vec::new();
        for col in &table.primary_key {
            let field = &ri.key[col];
            match action.get(field) {
                None => problem(
                    format!("{iat}.key.{col}"),
                    format!(
                        "`{field}` is not an action field of this kind (action: {})",
                        join(action.keys())
                    ),
                ),
                Some(t) if !table.columns[col].accepts(*t) => problem(
                    format!("{iat}.key.{col}"),
                    format!(
                        "action field `{field}` is {t}, key column `{col}` of `{}` is {}",
                        table.name, table.columns[col]
                    ),
                ),
                Some(_) => key.push((col.clone(), field.clone())),
            }
        }
        if let (Some(need), true) = (need, key.len() == table.primary_key.len()) {
            inputs.insert(
                input.clone(),
                DecisionInput { name: input, table: ri.table, column: ri.column, column_type, key, need },
            );
        }
    }
    let mut known: Vec<(String, ValueType)> = inputs
        .values()
        .map(|i| (i.name.clone(), i.column_type))
        .chain(action.iter().map(|(f, t)| (f.clone(), *t)))
        .collect();
    let mut rule = Vec::new();
    for (step, text) in raw.rule {
        let sat = format!("{at}.rule.{step}");
        if !valid_name(&step) || known.iter().any(|(k, _)| *k == step) {
            problem(
                sat.clone(),
                "a step's name is lower_snake_case and not an input, action field or earlier step".into(),
            );
            continue;
        }
        let resolve = |n: &str| known.iter().find(|(k, _)| k == n).map(|(_, t)| *t);
        match Expr::parse(&text).and_then(|e| e.type_check(&resolve).map(|t| (e, t))) {
            Ok((expr, ExprType::Of(t))) => {
                known.push((step.clone(), t));
                rule.push(RuleStep { name: step, text, expr });
            }
            Ok((_, ExprType::Null)) => problem(sat, "a step that is always null computes nothing".into()),
            Err(e) => problem(sat, e),
        }
    }
    match template_names(&raw.summary) {
        Ok(names) => {
            for n in names {
                if !known.iter().any(|(k, _)| k == n) {
                    problem(
                        format!("{at}.summary"),
                        format!("`{{{n}}}` is not an action field, input or rule step of this kind"),
                    );
                }
            }
        }
        Err(e) => problem(format!("{at}.summary"), e),
    }
    if problems.len() > before {
        return None;
    }
    Some(DecisionKind {
        name: name.to_string(),
        description: raw.description,
        module: raw.module,
        summary: raw.summary,
        action,
        inputs,
        rule,
    })
}

fn join<'a>(names: impl Iterator<Item = &'a String>) -> String {
    names.map(String::as_str).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CompanySpec, SpecError};

    const BASE: &str = r#"
[events."inventory.counted"]
fields = { item = "string", location = "string", qty = "int" }
[tables.stock]
primary_key = ["item", "location"]
freshness = "5m"
columns = { item = "string", location = "string", on_hand = "int", reorder_point = "int" }
"#;

    fn load(decisions: &str) -> Result<CompanySpec, Vec<String>> {
        CompanySpec::from_sources(&[("s.toml".into(), format!("{BASE}{decisions}"))]).map_err(|e| match e {
            SpecError::Invalid(p) => p.into_iter().map(|p| format!("{}: {}", p.at, p.message)).collect(),
            other => vec![other.to_string()],
        })
    }

    const GOOD: &str = r#"
[decisions.reorder]
module = "inventory"
summary = "Order {qty} x {item} for {location}: on hand {on_hand} < {reorder_point}"
action = { item = "string", location = "string", qty = "int" }
[decisions.reorder.inputs.on_hand]
table = "stock"
column = "on_hand"
key = { item = "item", location = "location" }
need = "1m"
[decisions.reorder.inputs.reorder_point]
table = "stock"
column = "reorder_point"
key = { item = "item", location = "location" }
need = "1d"
[decisions.reorder.rule]
short_by = "reorder_point - on_hand"
short = "short_by > 0"
"#;

    #[test]
    fn a_declared_kind_loads_with_inputs_in_order_and_evaluates_its_rule_with_the_numbers_in_it() {
        let spec = load(GOOD).unwrap();
        let k = &spec.decisions["reorder"];
        assert_eq!(k.inputs.keys().collect::<Vec<_>>(), ["on_hand", "reorder_point"]);
        assert_eq!(
            k.inputs["on_hand"].key,
            [("item".into(), "item".into()), ("location".into(), "location".into())]
        );
        let values = |n: &str| match n {
            "on_hand" => Some(Value::Int(40)),
            "reorder_point" => Some(Value::Int(48)),
            _ => None,
        };
        let steps = k.evaluate(&values);
        assert_eq!(steps[0].with_values, "48 - 40");
        assert_eq!(steps[0].value, Ok(Value::Int(8)));
        assert_eq!(steps[1].with_values, "8 > 0");
        assert_eq!(steps[1].value, Ok(Value::Bool(true)));
        let text = k.render_summary(&|n| match n {
            "qty" => Some("100".into()),
            "item" => Some("bolt".into()),
            n => values(n).map(|v| v.to_string()).or(Some("south".into())),
        });
        assert_eq!(text, "Order 100 x bolt for south: on hand 40 < 48");
    }

    #[test]
    fn an_input_of_an_unknown_table_or_column_is_refused_naming_it() {
        let e = load(
            &GOOD
                .replace("table = \"stock\"\ncolumn = \"on_hand\"", "table = \"stok\"\ncolumn = \"on_hand\""),
        )
        .unwrap_err();
        assert!(
            e.iter().any(|p| p.starts_with("decisions.reorder.inputs.on_hand.table: unknown table `stok`")),
            "{e:?}"
        );
        let e = load(&GOOD.replace("column = \"on_hand\"", "column = \"onhand\"")).unwrap_err();
        assert!(
            e.iter().any(|p| p.contains("inputs.on_hand.column") && p.contains("no column `onhand`")),
            "{e:?}"
        );
    }

    #[test]
    fn an_input_key_must_be_the_tables_whole_key_from_declared_action_fields_of_fitting_types() {
        let partial = GOOD.replacen(
            "key = { item = \"item\", location = \"location\" }",
            "key = { item = \"item\" }",
            1,
        );
        let e = load(&partial).unwrap_err();
        assert!(e.iter().any(|p| p.contains("inputs.on_hand.key") && p.contains("item, location")), "{e:?}");
        let undeclared = GOOD.replacen("location = \"location\" }", "location = \"where\" }", 1);
        let e = load(&undeclared).unwrap_err();
        assert!(
            e.iter()
                .any(|p| p.contains("inputs.on_hand.key.location")
                    && p.contains("`where` is not an action field")),
            "{e:?}"
        );
        let typed = GOOD.replace("location = \"string\", qty", "location = \"int\", qty");
        let e = load(&typed).unwrap_err();
        assert!(e.iter().any(|p| p.contains("key.location") && p.contains("is int")), "{e:?}");
    }

    #[test]
    fn a_bad_need_module_rule_step_or_summary_placeholder_is_refused() {
        let e = load(&GOOD.replace("need = \"1m\"", "need = \"soon\"")).unwrap_err();
        assert!(e.iter().any(|p| p.starts_with("decisions.reorder.inputs.on_hand.need")), "{e:?}");
        let e = load(&GOOD.replace("module = \"inventory\"", "module = \"finance\"")).unwrap_err();
        assert!(e.iter().any(|p| p.contains("decisions.reorder.module") && p.contains("`finance`")), "{e:?}");
        let e = load(&GOOD.replace("short = \"short_by > 0\"", "short = \"short_by > 'x'\"")).unwrap_err();
        assert!(e.iter().any(|p| p.starts_with("decisions.reorder.rule.short")), "{e:?}");
        let e = load(&GOOD.replace("{reorder_point}\"", "{reorder}\"")).unwrap_err();
        assert!(e.iter().any(|p| p.contains("summary") && p.contains("`{reorder}`")), "{e:?}");
        let e = load(&GOOD.replace("{reorder_point}\"", "{reorder_point\"")).unwrap_err();
        assert!(e.iter().any(|p| p.contains("summary") && p.contains("without its")), "{e:?}");
        let none = "[decisions.empty]\nmodule = \"inventory\"\nsummary = \"x\"\ninputs = {}\n";
        let e = load(none).unwrap_err();
        assert!(
            e.iter().any(|p| p.contains("decisions.empty.inputs") && p.contains("at least one")),
            "{e:?}"
        );
    }

    #[test]
    fn a_proposals_action_is_checked_against_the_declared_fields() {
        let spec = load(GOOD).unwrap();
        let k = &spec.decisions["reorder"];
        let action = |v: serde_json::Value| v.as_object().unwrap().clone();
        assert!(k.check_action(&action(serde_json::json!({"item": "b", "location": "n", "qty": 3}))).is_ok());
        let e = k.check_action(&action(serde_json::json!({"item": "b", "location": "n"}))).unwrap_err();
        assert!(e.starts_with("action.qty: missing"), "{e}");
        let e = k
            .check_action(&action(serde_json::json!({"item": "b", "location": "n", "qty": "many"})))
            .unwrap_err();
        assert!(e.starts_with("action.qty"), "{e}");
        let key = k
            .input_key(&k.inputs["on_hand"], &action(serde_json::json!({"item": "b", "location": "n"})))
            .unwrap();
        assert_eq!(
            key,
            [("item".into(), Value::String("b".into())), ("location".into(), Value::String("n".into()))]
        );
    }
}
