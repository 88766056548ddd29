//! The timezone each group's memory is dated in (`memory.timezone`, per
//! group `[memory.groups.<folder>] timezone`), known to the whole process
//! once the settings are loaded, as the embedding model is: recall, the
//! archiver, the container's environment and the memory block read it
//! where no settings are at hand.

use std::sync::{Arc, RwLock};

use chrono_tz::Tz;
use g2_settings::MemorySettings;

static SETTINGS: RwLock<Option<Arc<MemorySettings>>> = RwLock::new(None);

/// Takes the timezones of these settings (each command does, when it loads
/// them).
pub fn configure(memory: &MemorySettings) {
    if let Ok(mut s) = SETTINGS.write() {
        *s = Some(Arc::new(memory.clone()));
    }
}

/// The timezone `group`'s memory is dated in; UTC before [`configure`].
pub fn of(group: &str) -> Tz {
    SETTINGS
        .read()
        .ok()
        .and_then(|s| s.as_ref().map(|m| m.timezone_for(group)))
        .unwrap_or(Tz::UTC)
}
