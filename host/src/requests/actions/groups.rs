//! `register_group`, `refresh_groups`: the main group's only.

use g2_core::ipc;

use crate::Result;
use crate::groups::{self, Group, NewGroup};
use crate::requests::RequestServer;
use crate::requests::authorize::{self, Family};

impl RequestServer {
    pub(super) async fn register_group(&self, me: &Group, new: NewGroup) -> Result<String> {
        authorize::check(me, Family::Groups, false, || {
            "only the main group registers groups".into()
        })?;
        let g = groups::register(&self.store, &self.home, new, &self.links.assistant_name).await?;
        Ok(format!(
            "Registered group {} (folder {}, chat {}).",
            g.name, g.folder, g.jid
        ))
    }

    /// Rewrites `available_groups.json` in the main group's IPC folder.
    pub(super) async fn refresh_groups(&self, me: &Group) -> Result<String> {
        authorize::check(me, Family::Groups, false, || {
            "only the main group sees the groups".into()
        })?;
        let list = self.store.read(crate::store::groups::list).await?;
        let tree = self.home.ipc_tree(&me.folder)?;
        let r = tree.write_atomic(
            ipc::AVAILABLE_GROUPS,
            &serde_json::to_vec_pretty(&groups::snapshot(&list)).unwrap_or_default(),
        );
        self.home.confined(&me.folder, ipc::AVAILABLE_GROUPS, r)?;
        Ok(format!(
            "available_groups.json lists {} groups.",
            list.len()
        ))
    }
}
