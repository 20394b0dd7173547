//! The circuit breaker's rules (issue 5): a breaker's row and an outcome in, the
//! next row and what to do out. Pure like the rest of the core.
