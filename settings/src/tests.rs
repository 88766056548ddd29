use super::*;

#[test]
fn defaults_file_then_env() {
    figment::Jail::expect_with(|jail| {
        let home = jail.directory().to_path_buf();
        assert_eq!(Settings::load(&home, None).unwrap(), Settings::default());

        jail.create_file(
            "g2.toml",
            "assistant_name = \"Andy\"\n[archive]\nmax_message_chars = 500\n",
        )?;
        let s = Settings::load(&home, None).unwrap();
        assert_eq!(s.assistant_name, "Andy");
        assert_eq!(s.archive.max_message_chars, 500);
        assert!(s.archive.redact_secrets, "on unless turned off");
        assert!(s.archive_options(&Default::default()).redact_secrets);

        jail.set_env("G2_ASSISTANT_NAME", "Bea");
        jail.set_env("G2_STORE__BUSY_TIMEOUT_MS", "42");
        jail.set_env("G2_HOME", "/somewhere");
        // Variables of the scripts are not settings and must not break loading.
        jail.set_env("G2_SKIP_DOCKER", "1");
        jail.set_env("G2_FIXTURES", "/tmp/x");
        let s = Settings::load(&home, None).unwrap();
        assert_eq!(s.assistant_name, "Bea");
        assert_eq!(s.store.busy_timeout_ms, 42);
        assert_eq!(s.archive.max_message_chars, 500);

        jail.set_env("G2_ARCHIVE__REDACT_SECRETS", "false");
        let s = Settings::load(&home, None).unwrap();
        assert!(!s.archive.redact_secrets);
        assert!(!s.archive_options(&Default::default()).redact_secrets);

        jail.set_env("G2_PROVIDER", "offline");
        jail.set_env("G2_MODEL", "m1");
        jail.set_env("G2_GATEWAY__DAILY_TOKENS", "1000");
        let s = Settings::load(&home, None).unwrap();
        assert_eq!(s.gateway.provider, Some(ProviderKind::Offline));
        assert_eq!(s.gateway.model.as_deref(), Some("m1"));
        assert_eq!(s.gateway.limits_for("any").daily_tokens, Some(1000));

        assert_eq!(s.channels.max_text_bytes, 32 * 1024);
        jail.set_env("G2_CHANNELS__MAX_TEXT_BYTES", "1024");
        let s = Settings::load(&home, None).unwrap();
        assert_eq!(s.channels.max_text_bytes, 1024);
        Ok(())
    });
}

#[test]
fn bad_settings_are_clear_errors() {
    figment::Jail::expect_with(|jail| {
        let home = jail.directory().to_path_buf();
        jail.create_file("g2.toml", "assistent_name = \"typo\"\n")?;
        let err = Settings::load(&home, None).unwrap_err().to_string();
        assert!(err.contains("assistent_name"), "{err}");
        jail.create_file("g2.toml", "[archive]\nmax_message_chars = 0\n")?;
        assert!(Settings::load(&home, None).is_err());
        for (toml, why) in [
            ("[cluster]\nlease_secs = 1\n", "cluster.lease_secs"),
            ("[cluster]\nhost_id = \"a/b\"\n", "cluster.host_id"),
            ("[cluster]\nhost_id = \"\"\n", "cluster.host_id"),
            ("[cluster]\nruntime_dir = \"\"\n", "cluster.runtime_dir"),
            (
                "[channels]\nmax_text_bytes = 1023\n",
                "channels.max_text_bytes: from 1024 to 32768",
            ),
            (
                "[channels]\nmax_text_bytes = 32769\n",
                "channels.max_text_bytes",
            ),
        ] {
            jail.create_file("g2.toml", toml)?;
            let err = Settings::load(&home, None).unwrap_err().to_string();
            assert!(err.contains(why), "{toml}: {err}");
        }
        jail.create_file("g2.toml", "[cluster]\nhost_id = \"eu-1.b:2\"\n")?;
        assert!(Settings::load(&home, None).is_ok());
        jail.create_file("g2.toml", "")?;
        jail.set_env("G2_STORE__BUSY_TIMOUT_MS", "1");
        let err = Settings::load(&home, None).unwrap_err().to_string();
        assert!(err.contains("busy_timout_ms"), "{err}");
        let missing = home.join("nope.toml");
        let err = Settings::load(&home, Some(&missing))
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not exist"), "{err}");
        Ok(())
    });
}
