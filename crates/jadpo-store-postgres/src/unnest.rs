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
    /// `bigint`, `text`, `bool`) with one value per row.
    pub(crate) fn add<T: ToSql + Sync + 'a>(
        &mut self,
        name: &'static str,
        sql_type: &'static str,
        values: Vec<T>,
    ) -> &mut Self {
        self.names.push(name);
        self.types.push(sql_type);
        self.values.push(Box::new(values));
        self
    }

    /// The statement's row source, its parameters numbered from `first`:
    /// `unnest($2::bigint[], $3::text[]) AS u(id, state)`.
    pub(crate) fn from_clause(&self, first: usize) -> String {
        let arrays: Vec<String> =
            self.types.iter().enumerate().map(|(i, t)| format!("${}::{t}[]", first + i)).collect();
        format!("unnest({}) AS u({})", arrays.join(", "), self.names.join(", "))
    }

    /// The columns as the statement's parameters, in order.
    pub(crate) fn params(&self) -> impl Iterator<Item = &(dyn ToSql + Sync)> {
        self.values.iter().map(|v| &**v as &(dyn ToSql + Sync))
    }
}
