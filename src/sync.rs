//! Locks that survive a panic in a holder.
//!
//! Every `std::sync` lock in imrelay guards data that stays consistent between statements (a
//! map insert, a counter, a swap), and none is held across an `.await`. A holder that panics
//! therefore leaves nothing half-written, and the next caller takes the data as it is instead
//! of turning one panic into a panic in every later request. These traits say that once.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// [`Mutex::lock`], taking the data even if a holder panicked.
pub(crate) trait LockExt<T: ?Sized> {
    /// The guard, whether or not the mutex is poisoned.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> LockExt<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// [`RwLock::read`] and [`RwLock::write`], taking the data even if a writer panicked.
pub(crate) trait RwLockExt<T: ?Sized> {
    /// A read guard, whether or not the lock is poisoned.
    fn reading(&self) -> RwLockReadGuard<'_, T>;
    /// A write guard, whether or not the lock is poisoned.
    fn writing(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RwLockExt<T> for RwLock<T> {
    fn reading(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(|p| p.into_inner())
    }

    fn writing(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_holder_leaves_the_data_usable() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let rw = std::sync::Arc::new(RwLock::new(1));
        let (m2, rw2) = (m.clone(), rw.clone());
        let _ = std::thread::spawn(move || {
            let _g = m2.lock();
            let _w = rw2.write();
            panic!("holder fails");
        })
        .join();
        assert!(m.is_poisoned() && rw.is_poisoned());
        *m.locked() += 1;
        *rw.writing() += 1;
        assert_eq!((*m.locked(), *rw.reading()), (2, 2));
    }
}
