//! Rows passed to one statement as columns of arrays (`unnest`), each column
//! named, typed and filled in one place, so that a column's values, its
//! parameter and its name in the statement cannot drift apart.

use postgres::types::ToSql;

/// The columns of the rows a statement takes, in the order added.
#[derive(Default)]
pub(crate) struct Columns<'a> {
    names: Vec<&'static str>,
    types: Vec<&'static str>,
    values: Vec<Box<dyn ToSql + Sync + 'a>>,
}

impl<'a> Columns<'a> {
    /// Add the column `name` of SQL type `sql_type` (its elements' type:
    /// `bigint`, `text`, `bool`) with one value per row: a `Vec` or a slice.
    pub(crate) fn add(
        &mut self,
        name: &'static str,
        sql_type: &'static str,
        values: impl ToSql + Sync + 'a,
    ) -> &mut Self {
        self.names.push(name);
        self.types.push(sql_type);
        self.values.push(Box::new(values));
        self
    }

    /// The statement's row source, its parameters numbered from `first`:
    /// `unnest($2::bigint[], $3::text[]) AS u(id, state)`.
    pub(crate) fn rows_clause(&self, first: usize) -> String {
        let arrays: Vec<String> =
            self.types.iter().enumerate().map(|(i, t)| format!("${}::{t}[]", first + i)).collect();
        format!("unnest({}) AS u({})", arrays.join(", "), self.names.join(", "))
    }

    /// The statement's parameters: `first` (its `$1`, `$2`, ...), then the
    /// columns, which [`Columns::rows_clause`] numbers on from `first.len() + 1`.
    pub(crate) fn params_after<'p>(&'p self, first: &[&'p (dyn ToSql + Sync)]) -> Vec<&'p (dyn ToSql + Sync)> {
        let mut params = first.to_vec();
        params.extend(self.values.iter().map(|v| &**v as &(dyn ToSql + Sync)));
        params
    }
}
