//! `clone_by_field!`: a `Clone` implementation whose `clone_from` clones field by field, so that
//! every `Vec` keeps its buffer (a derived `clone_from` clones the whole value and drops the old
//! one). World snapshots are taken into kept ones and restored this way without allocating.
//! The field list is checked by the compiler: a struct literal and a destructuring pattern
//! both name every field, so a field added to the struct and not to the list is an error.

/// `clone_by_field!(Type { field, ... })` implements `Clone` for `Type` with `clone_from`
/// calling each field's `clone_from` (see the module docs).
macro_rules! clone_by_field {
    ($ty:ident { $($field:ident),+ $(,)? }) => {
        impl Clone for $ty {
            fn clone(&self) -> Self {
                Self {
                    $($field: self.$field.clone()),+
                }
            }

            fn clone_from(&mut self, source: &Self) {
                let Self { $($field),+ } = source;
                $(self.$field.clone_from($field);)+
            }
        }
    };
}
