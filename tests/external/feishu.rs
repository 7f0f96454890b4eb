//! The Feishu fake and its helpers from the `it` tests, shared by path.

#[path = "../it/feishu/fake.rs"]
pub(crate) mod fake;
#[path = "../it/feishu/helpers.rs"]
pub(crate) mod helpers;
