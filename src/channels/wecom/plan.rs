//! WeCom's outbox jobs are the kit's (`channels::plan::TextJob`), named in `mod.rs`; this
//! name stays for the files that still say `plan::Job`.

pub(crate) use super::Job;
