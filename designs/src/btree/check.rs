//! Model checking of the btree node protocols (filled in below).
