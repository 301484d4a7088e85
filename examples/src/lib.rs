//! Runnable programs, one per contract: see examples/.
