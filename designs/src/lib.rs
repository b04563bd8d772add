//! Concurrent designs written once, generic over their atomic [`backend::Backend`].
#![allow(missing_docs)]
pub mod backend;
