//! Taking the Sentry's locks. A lock whose holder panicked is taken as it
//! is: the panic already ends that guest call with an error, and every
//! other call must go on, not fail on the poison too.

use std::sync::{Mutex, MutexGuard};

/// `Mutex::lock` that takes a poisoned lock as well.
pub trait Locked<T: ?Sized> {
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|e| e.into_inner())
    }
}
