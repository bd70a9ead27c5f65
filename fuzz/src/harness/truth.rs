//! The truth property (stub while it is written).
