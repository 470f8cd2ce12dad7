//! Scalar functions that cannot build values larger than [`Limits::value_bytes`].
//!
//! Some functions allocate in proportion to an argument's *value* (`repeat('x', 2000000000)`,
//! `array_repeat(1, 2000000000)`, `lpad(s, n)`, `range(0, n)`), which no memory pool sees:
//! DataFusion's pool only tracks operators. So every scalar function of a query's session is
//! replaced by [`Bounded`], which
//!
//! 1. before calling the function, estimates what it will build from its arguments when the
//!    function is one of [`GROWING`], and refuses above the limit, naming the function;
//! 2. after calling any function, refuses an output above the limit, so that functions whose
//!    output is a few times their input (`encode`, `upper`, `concat`, …) cannot compound
//!    through nesting;
//! 3. is volatile, so nothing is computed once while planning and then copied into every row
//!    of a batch (a constant output counts once per row, as it will be copied).
//!
//! The `||` operator on strings is planned with both operands passed through `bounded`, an
//! identity function with the same checks, so a chain of `||` cannot grow without bound either.
//! The limit is per call and batch of rows ([`BATCH_ROWS`] at most).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, FieldRef, Int64Type, IntervalMonthDayNanoType, IntervalUnit, TimeUnit,
};
use datafusion::common::config::ConfigOptions;
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::error::DataFusionError;
use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::interval_arithmetic::Interval;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::preimage::PreimageResult;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::sqlparser::ast::BinaryOperator;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, ExpressionPlacement, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, StructFieldMapping, TypeSignature, Volatility,
};

use crate::error::ValueLimit;
use crate::limits::{bytes, Limits};

/// Rows of one batch: what a constant is copied into, at most.
pub(crate) const BATCH_ROWS: usize = 1024;

/// How a function's output grows with its arguments' values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Growth {
    /// `f(value, n)`: `n` copies of `value`.
    Copies,
    /// `f(s, n[, fill])`: `n` characters, counted at 4 bytes each.
    Pad,
    /// `f(array, n[, fill])`: the array, and `n` elements as large as `fill`.
    Resize,
    /// `f([start,] stop[, step])`: one 8-byte element per step.
    Series,
    /// `f(s, from, to)`: every `from` in `s` replaced by `to`.
    Replace,
}

/// The functions whose output is checked before they run, by canonical name.
const GROWING: [(&str, Growth); 8] = [
    ("repeat", Growth::Copies),
    ("array_repeat", Growth::Copies),
    ("lpad", Growth::Pad),
    ("rpad", Growth::Pad),
    ("array_resize", Growth::Resize),
    ("range", Growth::Series),
    ("generate_series", Growth::Series),
    ("replace", Growth::Replace),
];

/// A scalar function with a limit on what it builds (see the module's documentation).
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct Bounded {
    inner: ScalarUDF,
    growth: Option<Growth>,
    signature: Signature,
    limit: usize,
}

impl Bounded {
    fn new(inner: ScalarUDF, limit: usize) -> Bounded {
        let growth = GROWING.iter().find(|(n, _)| *n == inner.name()).map(|(_, g)| *g);
        let signature = Signature { volatility: Volatility::Volatile, ..inner.signature().clone() };
        Bounded { inner, growth, signature, limit }
    }

    fn refuse(&self, would: u128, rows: usize) -> DataFusionError {
        let would = u64::try_from(would).map(bytes).unwrap_or_else(|_| format!("{would} bytes"));
        DataFusionError::External(Box::new(ValueLimit(format!(
            "`{}` would build {would} for {rows} row(s), over the limit of {} that one function may build \
             for one batch of rows",
            self.inner.name(),
            bytes(self.limit as u64)
        ))))
    }

    /// What the function would build, by its growth and arguments.
    fn estimate(&self, growth: Growth, args: &ScalarFunctionArgs) -> Result<u128> {
        let n = args.number_rows.max(1);
        let arg = |i: usize| args.args.get(i).map(Arg::new).transpose();
        let mut total: u128 = 0;
        match growth {
            Growth::Copies => {
                let (Some(value), Some(count)) = (arg(0)?, arg(1)?) else { return Ok(0) };
                let count = count.ints()?;
                for r in 0..n {
                    total += value.bytes(r) as u128 * count.at(r).max(0) as u128;
                }
            }
            Growth::Pad => {
                let Some(count) = arg(1)? else { return Ok(0) };
                let count = count.ints()?;
                for r in 0..n {
                    total += 4 * count.at(r).max(0) as u128;
                }
            }
            Growth::Resize => {
                let (Some(array), Some(count)) = (arg(0)?, arg(1)?) else { return Ok(0) };
                let fill = arg(2)?;
                let count = count.ints()?;
                for r in 0..n {
                    let each = fill.as_ref().map_or(0, |f| f.bytes(r)).max(8);
                    total += array.bytes(r) as u128 + count.at(r).max(0) as u128 * each as u128;
                }
            }
            Growth::Series => {
                let series: Vec<Arg> =
                    (0..args.args.len()).filter_map(|i| arg(i).transpose()).collect::<Result<_>>()?;
                let steps = series_steps(&series)?;
                for r in 0..n {
                    total += 8 * steps(r);
                }
            }
            Growth::Replace => {
                let (Some(s), Some(from), Some(to)) = (arg(0)?, arg(1)?, arg(2)?) else { return Ok(0) };
                let (s, from, to) = (s.strings()?, from.strings()?, to.strings()?);
                for r in 0..n {
                    let (Some(s), Some(from), Some(to)) = (s.at(r), from.at(r), to.at(r)) else { continue };
                    total += (s.len() + s.matches(from).count() * to.len()) as u128;
                }
            }
        }
        Ok(total)
    }
}

/// An argument row by row; a constant is the same in every row.
struct Arg {
    array: ArrayRef,
    constant: bool,
}

impl Arg {
    fn new(v: &ColumnarValue) -> Result<Arg> {
        Ok(match v {
            ColumnarValue::Array(a) => Arg { array: Arc::clone(a), constant: false },
            ColumnarValue::Scalar(s) => Arg { array: s.to_array()?, constant: true },
        })
    }

    fn index(&self, row: usize) -> usize {
        if self.constant {
            0
        } else {
            row
        }
    }

    /// Bytes of the value in `row` (0 when null).
    fn bytes(&self, row: usize) -> usize {
        let i = self.index(row);
        if i >= self.array.len() || self.array.is_null(i) {
            return 0;
        }
        match self.array.data_type() {
            DataType::Utf8 => self.array.as_string::<i32>().value(i).len(),
            DataType::LargeUtf8 => self.array.as_string::<i64>().value(i).len(),
            DataType::Utf8View => self.array.as_string_view().value(i).len(),
            _ => self.array.slice(i, 1).to_data().get_slice_memory_size().unwrap_or(0),
        }
    }

    fn cast(&self, to: &DataType) -> Result<Arg> {
        Ok(Arg { array: cast(&self.array, to)?, constant: self.constant })
    }

    fn ints(&self) -> Result<Ints> {
        Ok(Ints(self.cast(&DataType::Int64)?))
    }

    fn strings(&self) -> Result<Strings> {
        Ok(Strings(self.cast(&DataType::Utf8)?))
    }
}

struct Ints(Arg);

impl Ints {
    /// The value in `row`, 0 when null.
    fn at(&self, row: usize) -> i64 {
        let a = self.0.array.as_primitive::<Int64Type>();
        let i = self.0.index(row);
        if i < a.len() && a.is_valid(i) {
            a.value(i)
        } else {
            0
        }
    }
}

struct Strings(Arg);

impl Strings {
    fn at(&self, row: usize) -> Option<&str> {
        let a = self.0.array.as_string::<i32>();
        let i = self.0.index(row);
        (i < a.len() && a.is_valid(i)).then(|| a.value(i))
    }
}

/// Steps of `range`/`generate_series` per row: integers, or dates and timestamps with an
/// interval (a month counted as 28 days, the most steps it can make).
fn series_steps(args: &[Arg]) -> Result<Box<dyn Fn(usize) -> u128>> {
    let temporal = args.first().is_some_and(|a| {
        matches!(a.array.data_type(), DataType::Date32 | DataType::Date64 | DataType::Timestamp(..))
    });
    if temporal && args.len() == 3 {
        // Microseconds hold any date (nanoseconds end in 2262).
        let us = DataType::Timestamp(TimeUnit::Microsecond, None);
        let start = Ints(args[0].cast(&us)?.cast(&DataType::Int64)?);
        let stop = Ints(args[1].cast(&us)?.cast(&DataType::Int64)?);
        let step = args[2].cast(&DataType::Interval(IntervalUnit::MonthDayNano))?;
        return Ok(Box::new(move |r| {
            let a = step.array.as_primitive::<IntervalMonthDayNanoType>();
            let i = step.index(r);
            if i >= a.len() || a.is_null(i) {
                return 0;
            }
            let v = a.value(i);
            let day = 86_400_000_000_000i128;
            let step =
                (v.months as i128 * 28 * day + v.days as i128 * day + v.nanoseconds as i128).unsigned_abs();
            let span = (stop.at(r) as i128 - start.at(r) as i128).unsigned_abs() * 1000;
            span / step.max(1) + 1
        }));
    }
    if temporal {
        return Ok(Box::new(|_| 0));
    }
    let ints: Vec<Ints> = args.iter().map(Arg::ints).collect::<Result<_>>()?;
    Ok(Box::new(move |r| {
        let (start, stop, step) = match ints.len() {
            1 => (0, ints[0].at(r), 1),
            2 => (ints[0].at(r), ints[1].at(r), 1),
            _ => (ints[0].at(r), ints[1].at(r), ints[2].at(r)),
        };
        (stop as i128 - start as i128).unsigned_abs() / (step as i128).unsigned_abs().max(1) + 1
    }))
}

/// Bytes of an output: an array's buffers, or a constant once per row.
fn output_bytes(v: &ColumnarValue, rows: usize) -> u128 {
    match v {
        ColumnarValue::Array(a) => a.get_array_memory_size() as u128,
        ColumnarValue::Scalar(s) => s.size() as u128 * rows.max(1) as u128,
    }
}

// Delegates every method but `signature` (volatile) and `invoke_with_args` (checked).
impl ScalarUDFImpl for Bounded {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        self.inner.schema_name(args)
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs<'_>) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        if let Some(growth) = self.growth {
            let would = self.estimate(growth, &args)?;
            if would > self.limit as u128 {
                return Err(self.refuse(would, rows));
            }
        }
        let out = self.inner.invoke_with_args(args)?;
        let built = output_bytes(&out, rows);
        if built > self.limit as u128 {
            return Err(self.refuse(built, rows));
        }
        Ok(out)
    }

    fn with_updated_config(&self, config: &ConfigOptions) -> Option<ScalarUDF> {
        let updated = self.inner.inner().with_updated_config(config)?;
        Some(ScalarUDF::new_from_impl(Bounded::new(updated, self.limit)))
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        // A function whose growth is checked is not rewritten: the rewrite would call the
        // unchecked function.
        if self.growth.is_some() {
            return Ok(ExprSimplifyResult::Original(args));
        }
        self.inner.simplify(args, info)
    }

    fn preimage(&self, args: &[Expr], lit_expr: &Expr, info: &SimplifyContext) -> Result<PreimageResult> {
        self.inner.preimage(args, lit_expr, info)
    }

    fn conditional_arguments<'a>(&self, args: &'a [Expr]) -> Option<(Vec<&'a Expr>, Vec<&'a Expr>)> {
        self.inner.conditional_arguments(args)
    }

    fn short_circuits(&self) -> bool {
        self.inner.short_circuits()
    }

    fn evaluate_bounds(&self, input: &[&Interval]) -> Result<Interval> {
        self.inner.evaluate_bounds(input)
    }

    fn propagate_constraints(
        &self,
        interval: &Interval,
        inputs: &[&Interval],
    ) -> Result<Option<Vec<Interval>>> {
        self.inner.propagate_constraints(interval, inputs)
    }

    fn struct_field_mapping(&self, literal_args: &[Option<ScalarValue>]) -> Option<StructFieldMapping> {
        self.inner.struct_field_mapping(literal_args)
    }

    fn output_ordering(&self, inputs: &[ExprProperties]) -> Result<SortProperties> {
        self.inner.output_ordering(inputs)
    }

    fn preserves_lex_ordering(&self, inputs: &[ExprProperties]) -> Result<bool> {
        self.inner.preserves_lex_ordering(inputs)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn placement(&self, args: &[ExpressionPlacement]) -> ExpressionPlacement {
        self.inner.placement(args)
    }
}

/// `bounded(x)`: `x` itself, refused when larger than the limit; wraps the operands of `||`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Identity {
    signature: Signature,
}

impl ScalarUDFImpl for Identity {
    fn name(&self) -> &str {
        "bounded"
    }

    /// The operand's own name, so that the answer's column names do not change.
    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        Ok(args.first().map(|a| a.schema_name().to_string()).unwrap_or_default())
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types.first().cloned().unwrap_or(DataType::Null))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs<'_>) -> Result<FieldRef> {
        args.arg_fields
            .first()
            .cloned()
            .ok_or_else(|| DataFusionError::Plan("bounded() takes one argument".into()))
    }

    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        args.args.pop().ok_or_else(|| DataFusionError::Plan("bounded() takes one argument".into()))
    }
}

/// Plans `a || b` as `bounded(a) || bounded(b)`, leaving the operator itself to the planners
/// after it (arrays are concatenated by `array_concat`, strings by the operator).
#[derive(Debug)]
struct BoundedConcat {
    bounded: Arc<ScalarUDF>,
}

impl ExprPlanner for BoundedConcat {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        _schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        if expr.op != BinaryOperator::StringConcat {
            return Ok(PlannerResult::Original(expr));
        }
        let wrap =
            |e: Expr| Expr::ScalarFunction(ScalarFunction::new_udf(Arc::clone(&self.bounded), vec![e]));
        Ok(PlannerResult::Original(RawBinaryExpr {
            op: expr.op,
            left: wrap(expr.left),
            right: wrap(expr.right),
        }))
    }
}

/// Replaces every scalar function of the session being built by its [`Bounded`] form, and
/// plans `||` through `bounded` first. Call after `with_default_features`.
pub(crate) fn bound(builder: &mut SessionStateBuilder, limits: &Limits) {
    if let Some(functions) = builder.scalar_functions() {
        for f in functions.iter_mut() {
            *f = Arc::new(ScalarUDF::new_from_impl(Bounded::new(f.as_ref().clone(), limits.value_bytes)));
        }
    }
    let identity = Identity { signature: Signature::new(TypeSignature::Any(1), Volatility::Volatile) };
    let bounded = Arc::new(ScalarUDF::new_from_impl(Bounded::new(
        ScalarUDF::new_from_impl(identity),
        limits.value_bytes,
    )));
    builder.expr_planners().get_or_insert_with(Vec::new).insert(0, Arc::new(BoundedConcat { bounded }));
}

/// The canonical names of the functions whose output is estimated before they run.
pub fn checked_before_running() -> impl Iterator<Item = &'static str> {
    GROWING.iter().map(|(n, _)| *n)
}
