//! btt-like statistics (placeholder replaced below).
