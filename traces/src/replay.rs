//! Replay sources (placeholder replaced below).
