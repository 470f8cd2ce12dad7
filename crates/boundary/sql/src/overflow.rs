//! Integer arithmetic that fails on overflow instead of wrapping around.
//!
//! DataFusion 54 computes `+`, `-` and `*` over integer columns with Arrow's wrapping kernels:
//! `on_hand + 9223372036854775807` is a large negative number, a wrong answer without an error
//! (constants alone are folded with checked arithmetic and already fail). PostgreSQL, Trino and
//! Paimon's Java readers fail instead, and so does livestate's own expression language. So, after
//! type coercion, the analyzer rule [`CheckedArithmetic`] replaces every `+`, `-` and `*` whose
//! operands have one integer type by a call of [`Checked`], which computes with Arrow's checked
//! kernels: an overflow fails the query with `Arithmetic overflow: Overflow happened on: A + B`,
//! which the API answers as the caller's data error (400). Column names stay as written.

use std::sync::Arc;

use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::Result;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

/// Rewrites integer `+`, `-`, `*` into [`Checked`] calls (see the module doc).
#[derive(Debug)]
pub(crate) struct CheckedArithmetic {
    add: Arc<ScalarUDF>,
    sub: Arc<ScalarUDF>,
    mul: Arc<ScalarUDF>,
}

impl CheckedArithmetic {
    pub(crate) fn new() -> CheckedArithmetic {
        let udf = |op| Arc::new(ScalarUDF::new_from_impl(Checked::new(op)));
        CheckedArithmetic {
            add: udf(Operator::Plus),
            sub: udf(Operator::Minus),
            mul: udf(Operator::Multiply),
        }
    }

    fn udf(&self, op: Operator) -> Option<&Arc<ScalarUDF>> {
        match op {
            Operator::Plus => Some(&self.add),
            Operator::Minus => Some(&self.sub),
            Operator::Multiply => Some(&self.mul),
            _ => None,
        }
    }

    fn rewrite_node(&self, plan: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
        // A scan's filters are pushed down later, from what this rule has already rewritten.
        if matches!(plan, LogicalPlan::TableScan(_)) {
            return Ok(Transformed::no(plan));
        }
        let schema = merge_schema(&plan.inputs());
        let names = NamePreserver::new(&plan);
        plan.map_expressions(|expr| {
            let name = names.save(&expr);
            expr.transform_up(|e| {
                let Expr::BinaryExpr(BinaryExpr { left, op, right }) = &e else {
                    return Ok(Transformed::no(e));
                };
                let Some(udf) = self.udf(*op) else { return Ok(Transformed::no(e)) };
                let (lt, rt) = (left.get_type(&schema)?, right.get_type(&schema)?);
                if lt != rt || !lt.is_integer() {
                    return Ok(Transformed::no(e));
                }
                let args = vec![left.as_ref().clone(), right.as_ref().clone()];
                Ok(Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(Arc::clone(udf), args))))
            })
            .map(|t| t.update_data(|e| name.restore(e)))
        })?
        .map_data(LogicalPlan::recompute_schema)
    }
}

impl AnalyzerRule for CheckedArithmetic {
    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|p| self.rewrite_node(p)).data()
    }

    fn name(&self) -> &str {
        "livestate_checked_integer_arithmetic"
    }
}

/// `a + b`, `a - b` or `a * b` of two integers of one type, failing on overflow.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct Checked {
    op: Operator,
    name: &'static str,
    signature: Signature,
}

impl Checked {
    fn new(op: Operator) -> Checked {
        let name = match op {
            Operator::Plus => "checked_add",
            Operator::Minus => "checked_sub",
            _ => "checked_mul",
        };
        Checked { op, name, signature: Signature::any(2, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for Checked {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        Ok(args[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [l, r] = &args.args[..] else {
            return datafusion::common::exec_err!("{} takes two arguments", self.name);
        };
        let kernel = match self.op {
            Operator::Plus => numeric::add,
            Operator::Minus => numeric::sub,
            _ => numeric::mul,
        };
        datafusion::physical_expr_common::datum::apply(l, r, kernel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Array, Int64Array};
    use datafusion::prelude::SessionContext;

    async fn run(sql: &str) -> Result<Vec<Option<i64>>> {
        let state = datafusion::execution::SessionStateBuilder::new()
            .with_default_features()
            .with_analyzer_rule(Arc::new(CheckedArithmetic::new()))
            .build();
        let ctx = SessionContext::new_with_state(state);
        ctx.sql("CREATE TABLE t (a BIGINT, b BIGINT) AS VALUES (9223372036854775807, 1), (-5, 3), (NULL, 2)")
            .await?
            .collect()
            .await?;
        let batches = ctx.sql(sql).await?.collect().await?;
        let mut out = Vec::new();
        for b in batches {
            let c = b.column(0).as_any().downcast_ref::<Int64Array>().expect("bigint").clone();
            out.extend((0..c.len()).map(|i| c.is_valid(i).then(|| c.value(i))));
        }
        Ok(out)
    }

    #[tokio::test]
    async fn integer_overflow_fails_the_query_instead_of_wrapping_and_names_the_values() {
        for sql in [
            "SELECT a + b FROM t",
            "SELECT b - a - a FROM t",
            "SELECT a * 2 FROM t",
            "SELECT sum(a * 2) FROM t",
            "SELECT b FROM t WHERE a + 1 > 0",
            "SELECT (SELECT max(a) + 1 FROM t)",
        ] {
            let e = run(sql).await.expect_err(sql).to_string();
            assert!(e.contains("Overflow happened on"), "{sql}: {e}");
        }
        assert!(run("SELECT a + b FROM t")
            .await
            .unwrap_err()
            .to_string()
            .contains("9223372036854775807 + 1"));
    }

    #[tokio::test]
    async fn arithmetic_that_fits_is_unchanged_nulls_included_and_keeps_its_column_name() {
        assert_eq!(run("SELECT b * 2 - 1 FROM t ORDER BY b").await.unwrap(), vec![Some(1), Some(3), Some(5)]);
        assert_eq!(run("SELECT a + b FROM t WHERE b > 1 ORDER BY b").await.unwrap(), vec![None, Some(-2)]);
        let state = datafusion::execution::SessionStateBuilder::new()
            .with_default_features()
            .with_analyzer_rule(Arc::new(CheckedArithmetic::new()))
            .build();
        let ctx = SessionContext::new_with_state(state);
        let df = ctx.sql("SELECT 1 + 2, CAST(3 AS BIGINT) * 4 AS x").await.unwrap();
        let names: Vec<String> = df.schema().fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(names, vec!["Int64(1) + Int64(2)", "x"]);
    }
}
