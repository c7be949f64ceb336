//! `send_media`, the persona's album. Through the real runtime, the real LLM planner and a
//! mock Gemini answering in the original's JSON task format: the album is listed in the
//! request (only for a persona that has one), a photo named by its id goes out once as a
//! media message, and an unknown id sends nothing at all. At the Telegram seam, the real
//! MTProto adapter against the simulated Telegram: a photo is sent once across a crash
//! between upload and send and across a crash after a send whose answer was lost, the next
//! send reuses the upload (no new parts reach the simulator), an expired file reference is
//! uploaded again, and the governor paces and guards it like any send. The original's media
//! folder (shared data) loads as an album with its descriptions.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::gemini::*;
use common::{AGENT, Harness, TestResult, config, shared_data};
use personad::adapters::memory::Action as Recorded;
use personad::core::album::Album;
use personad::core::model::{
    Chat, ChatId, MediaKind, Message, MessageId, OutgoingMedia, TelegramError,
};
use personad::core::persona::Persona;

/// A photo of more than one upload part (512 KiB), its bytes depending on `seed`.
fn photo_bytes(seed: u8) -> Vec<u8> {
    (0..600_000u32).map(|i| (i % 251) as u8 ^ seed).collect()
}

/// An agents folder with `name`'s persona file and album: a described photo, an audio file
/// described by a text sidecar, and a document without a description.
fn agents_with_album(root: &Path, name: &str) -> std::io::Result<PathBuf> {
    let agents = root.join("agents");
    let media = agents.join(format!("{name}.media"));
    std::fs::create_dir_all(&media)?;
    std::fs::write(
        agents.join(format!("{name}.md")),
        format!(
            "# Agent Name\n{name}\n\n# Agent Phone\n+15550100001\n\n# Agent Instructions\nBe yourself.\n"
        ),
    )?;
    std::fs::write(media.join("beach.jpg"), photo_bytes(7))?;
    std::fs::write(
        media.join("beach.jpg.json"),
        r#"{"unique_id": "beach1", "kind": "photo", "description": "A windy beach at dusk with two kites.", "mime_type": "image/jpeg"}"#,
    )?;
    std::fs::write(media.join("song.mp3"), b"ID3 not really a song")?;
    std::fs::write(
        media.join("song.mp3.md"),
        "Our band's demo, recorded in a garage.\n",
    )?;
    std::fs::write(media.join("notes.pdf"), b"%PDF-1.4 minimal")?;
    Ok(agents)
}

fn load(agents: &Path, name: &str) -> Persona {
    let report = personad::adapters::persona_loader::load_dir(agents, &[]).unwrap();
    report
        .usable()
        .find(|p| p.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} unusable: {:?}", report.entries))
}

#[test]
fn an_album_loads_with_sidecars_ids_from_content_and_warnings_for_missing_descriptions() {
    let dir = tempfile::tempdir().unwrap();
    let agents = agents_with_album(dir.path(), AGENT).unwrap();
    let report = personad::adapters::persona_loader::load_dir(&agents, &[]).unwrap();
    let entry = &report.entries[0];
    let p = entry.persona.as_ref().expect("usable");
    let ids: Vec<(&str, MediaKind)> = p
        .album
        .items
        .iter()
        .map(|i| (i.id.as_str(), i.kind))
        .collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(ids.contains(&("beach1", MediaKind::Photo)));
    let song = p
        .album
        .items
        .iter()
        .find(|i| i.file_name == "song.mp3")
        .unwrap();
    assert_eq!(song.kind, MediaKind::Audio);
    assert_eq!(song.id.len(), 12, "an id from the content hash");
    assert_eq!(
        song.description.as_deref(),
        Some("Our band's demo, recorded in a garage.")
    );
    let warned: Vec<String> = entry.problems.iter().map(ToString::to_string).collect();
    assert!(
        warned
            .iter()
            .any(|w| w.contains("notes.pdf") && w.contains("no description")),
        "{warned:?}"
    );
    // A file over the upload cap is left out with a warning (it is never read whole).
    let big = std::fs::File::create(agents.join(format!("{AGENT}.media/film.mp4"))).unwrap();
    big.set_len(personad::core::album::MAX_ITEM_BYTES + 1)
        .unwrap();
    let report = personad::adapters::persona_loader::load_dir(&agents, &[]).unwrap();
    let capped = &report.entries[0];
    let kept = capped.persona.as_ref().expect("still usable");
    assert!(kept.album.items.iter().all(|i| i.file_name != "film.mp4"));
    assert!(
        capped
            .problems
            .iter()
            .any(|w| w.to_string().contains("film.mp4") && w.to_string().contains("upload cap")),
        "{:?}",
        capped.problems
    );
    std::fs::remove_file(agents.join(format!("{AGENT}.media/film.mp4"))).unwrap();

    // The original's media.json listing, for `retrieve` to serve.
    let listed: serde_json::Value = serde_json::from_str(&p.album.media_json()).unwrap();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["media_id"] == "beach1" && i["media_type"] == "photo")
    );

    // A bad sidecar is an error naming it, and the persona is unusable.
    std::fs::write(
        agents.join(format!("{AGENT}.media/beach.jpg.json")),
        r#"{"unique_id": "beach1", "kind": "hologram"}"#,
    )
    .unwrap();
    let report = personad::adapters::persona_loader::load_dir(&agents, &[]).unwrap();
    let entry = &report.entries[0];
    assert!(entry.persona.is_none());
    let errors: Vec<String> = entry
        .problems
        .iter()
        .filter(|p| p.is_error())
        .map(ToString::to_string)
        .collect();
    assert!(
        errors
            .iter()
            .any(|e| e.contains("beach.jpg.json") && e.contains("hologram")),
        "{errors:?}"
    );
}

#[test]
fn the_originals_media_folder_loads_as_an_album_with_its_descriptions() {
    let Some(media) = shared_data("cw-telegram-agent/head/media") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("Heidi.md"),
        format!(
            "# Agent Name\nHeidi\n\n# Agent Phone\n+15550100001\n\n# Agent Instructions\nBe yourself.\n\n# Media Folder\n{}\n",
            media.display()
        ),
    )
    .unwrap();
    let heidi = load(&agents, "Heidi");
    let album: &Album = &heidi.album;
    assert_eq!(album.items.len(), 3, "{album:?}");
    let photo = album.get("4918428193711131585").expect("the photo");
    assert_eq!(photo.kind, MediaKind::Photo);
    assert_eq!(photo.mime, "image/jpeg");
    assert!(
        photo
            .description
            .as_deref()
            .is_some_and(|d| d.contains("charcoal drawings"))
    );
    let duck = album.get("5199421747077584990").expect("the duck sticker");
    assert_eq!(duck.kind, MediaKind::Sticker);
    assert!(album.items.iter().all(|i| i.description.is_some()));
    let section = album.prompt_section();
    assert!(section.contains("- 4918428193711131585 (photo): Heidi's friend Sylvia"));
}

#[tokio::test]
async fn a_photo_named_by_id_goes_out_once_and_an_unknown_id_sends_nothing() -> TestResult {
    let alice = person("Alice");
    let server = answering(|newest| {
        if newest.contains("a photo") {
            reply(r#"[{"kind": "send_media", "unique_id": "beach1", "reply_to": 1}]"#)
        } else if newest.contains("anything") {
            reply(r#"[{"kind": "send_media", "unique_id": "sunset99"}]"#)
        } else {
            reply(r#"[{"kind": "send", "text": "hello"}]"#)
        }
    })
    .await;
    let dir = tempfile::tempdir()?;
    let agents = agents_with_album(dir.path(), AGENT)?;
    let persona = load(&agents, AGENT);
    let state = dir.path().join("state");
    let mut h = Harness::start_as(
        persona,
        &state,
        planner(server.uri()),
        config(),
        std::slice::from_ref(&alice),
        None,
        None,
    );
    h.started().await;
    let asked = h.say(&alice, "Alice", "send me a photo of the beach").await;
    h.settle().await;
    let media: Vec<(ChatId, Message, String)> = h
        .telegram
        .actions()
        .into_iter()
        .filter_map(|r| match r.action {
            Recorded::Media {
                chat,
                message,
                album_id,
            } => Some((chat, message, album_id)),
            _ => None,
        })
        .collect();
    assert_eq!(media.len(), 1, "{:?}", h.telegram.actions());
    let (chat, message, id) = &media[0];
    assert_eq!((*chat, id.as_str()), (alice.id, "beach1"));
    assert_eq!(message.reply_to, Some(asked.id));
    assert_eq!(
        message.media.as_ref().map(|m| m.kind),
        Some(MediaKind::Photo)
    );
    assert!(h.sends().is_empty(), "no text: {:?}", h.sends());

    // The album is in the stable part of the request: ids, kinds, one-line descriptions.
    let bodies = bodies(&server).await;
    let first: serde_json::Value = serde_json::from_str(&bodies[0])?;
    let system = first["systemInstruction"].to_string();
    assert!(
        system.contains("- beach1 (photo): A windy beach at dusk with two kites."),
        "{system}"
    );

    // An id the album does not have: nothing goes out, not even as text.
    let before = h.telegram.actions().len();
    h.say(&alice, "Alice", "send me anything").await;
    h.settle().await;
    let after: Vec<_> = h.telegram.actions().into_iter().skip(before).collect();
    assert!(
        !after.iter().any(|r| matches!(
            r.action,
            Recorded::Media { .. } | Recorded::Send { .. } | Recorded::Sticker { .. }
        )),
        "{after:?}"
    );
    assert!(!h.sends().iter().any(|(_, t, _)| t.contains("sunset99")));
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_persona_without_an_album_is_not_offered_one() -> TestResult {
    let alice = person("Alice");
    let server = answering(|_| reply(r#"[{"kind": "send", "text": "hello"}]"#)).await;
    let dir = tempfile::tempdir()?;
    let mut h = Harness::start_with(
        dir.path(),
        planner(server.uri()),
        config(),
        std::slice::from_ref(&alice),
    );
    h.started().await;
    h.say(&alice, "Alice", "hi").await;
    h.settle().await;
    let bodies = bodies(&server).await;
    assert!(!bodies.is_empty());
    assert!(bodies.iter().all(|b| !b.contains("Media you may send")));
    h.stop().await?;
    Ok(())
}

/// The governor paces album items like any send and keeps the first-contact rule.
#[tokio::test]
async fn the_governor_guards_album_items_like_any_send() -> TestResult {
    use personad::adapters::governor::{Governor, GovernorConfig};
    use personad::adapters::memory::MemoryTelegram;
    use personad::ports::clock::{SharedClock, VirtualClock};
    use personad::ports::telegram::Telegram;
    let dir = tempfile::tempdir()?;
    let agents = agents_with_album(dir.path(), AGENT)?;
    let item = load(&agents, AGENT).album.get("beach1").cloned().unwrap();
    let clock: SharedClock = Arc::new(VirtualClock::new(common::t0(), true));
    let memory = Arc::new(MemoryTelegram::new(AGENT, Arc::clone(&clock), None)?);
    let stranger = Chat {
        id: ChatId(4242),
        kind: personad::core::model::ChatKind::Direct,
        title: "stranger".into(),
    };
    memory.ensure_chat(stranger.clone());
    let governor = Governor::new(memory.clone(), clock, GovernorConfig::default());
    let err = governor
        .send_media(outgoing(&item, stranger.id, 1))
        .await
        .unwrap_err();
    assert!(matches!(err, TelegramError::Invalid(_)), "{err:?}");
    assert!(memory.actions().is_empty(), "{:?}", memory.actions());
    assert_eq!(governor.stats().first_contact_refusals, 1);
    Ok(())
}

fn outgoing(item: &personad::core::album::AlbumItem, chat: ChatId, key: i64) -> OutgoingMedia {
    OutgoingMedia {
        chat,
        album_id: item.id.clone(),
        kind: item.kind,
        path: item.path.clone(),
        file_name: item.file_name.clone(),
        mime: item.mime.clone(),
        content_hash: item.content_hash.clone(),
        reply_to: None,
        idempotency_key: key,
    }
}

mod seam {
    //! The real MTProto adapter against the simulated Telegram.

    use super::*;
    use grammers_client::tl::Identifiable as _;
    use personad::adapters::mtproto::backend::MtprotoTelegram;
    use personad::adapters::mtproto::sim::{Peer, Sim, SimServer};
    use personad::adapters::mtproto::{self, ConnectOptions, Credentials, Servers};
    use personad::adapters::store::StateDir;
    use personad::ports::clock::{SharedClock, SystemClock};
    use personad::ports::telegram::Telegram;
    use personad::ports::updates::Sink;
    use tokio_util::sync::CancellationToken;

    #[derive(Default)]
    struct Lines(Mutex<Vec<String>>);

    impl Sink for Lines {
        fn inbound(&self, _: Chat, message: Message, _trigger: bool) {
            self.0.lock().unwrap().push(message.text);
        }
        fn owner_wrote(&self, _: Chat, message: Message) {
            self.0
                .lock()
                .unwrap()
                .push(format!("owner #{}", message.id));
        }
        fn edited(&self, _: Chat, _: Message) {}
        fn deleted(&self, _: Option<ChatId>, _: Vec<MessageId>) {}
        fn migrated(&self, _: ChatId, _: ChatId) {}
        fn unauthorized(&self, reason: &str) {
            self.0
                .lock()
                .unwrap()
                .push(format!("unauthorized {reason}"));
        }
    }

    async fn until(what: &str, mut f: impl FnMut() -> bool) {
        for _ in 0..500 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("timed out waiting for {what}");
    }

    /// One run of the daemon's Telegram side: the adapter connected on `state`, its pump
    /// serving until the run ends (the kill: its session lock goes with it).
    struct Run {
        telegram: Arc<MtprotoTelegram>,
        stop: CancellationToken,
        served: tokio::task::JoinHandle<()>,
        lines: Arc<Lines>,
    }

    impl Run {
        async fn start(state: &StateDir, sim: &Sim, me: i64) -> Run {
            let clock: SharedClock = Arc::new(SystemClock);
            let creds = Credentials {
                api_id: 1,
                api_hash: mtproto::ApiHash::new("sim"),
                servers: Servers::Sim,
            };
            let before = sim
                .requests(me)
                .iter()
                .filter(|r| **r == "updates.getState" || **r == "updates.getDifference")
                .count();
            let connected = mtproto::connect(
                state,
                "Wren",
                &creds,
                ConnectOptions::default(),
                Arc::clone(&clock),
            )
            .await
            .unwrap();
            let telegram = Arc::clone(&connected.telegram);
            let lines = Arc::new(Lines::default());
            let stop = CancellationToken::new();
            let (s, st) = (Arc::clone(&lines), stop.clone());
            let served = tokio::spawn(async move {
                let _ = connected
                    .serve("Wren".into(), s, ConnectOptions::default(), clock, st)
                    .await;
            });
            until("the update stream to start", || {
                sim.requests(me)
                    .iter()
                    .filter(|r| **r == "updates.getState" || **r == "updates.getDifference")
                    .count()
                    > before
            })
            .await;
            Run {
                telegram,
                stop,
                served,
                lines,
            }
        }

        /// Ends the run where it stands (nothing more is written for it).
        async fn kill(self) {
            self.stop.cancel();
            let _ = self.served.await;
            drop(self.telegram);
        }
    }

    fn parts(sim: &Sim, me: i64) -> usize {
        sim.requests(me)
            .iter()
            .filter(|r| **r == "upload.saveFilePart")
            .count()
    }

    /// Our media messages in the chat with `peer`.
    fn media_messages(sim: &Sim, me: i64, peer: i64) -> Vec<personad::adapters::mtproto::sim::Msg> {
        sim.transcript(me, Peer::User(peer))
            .into_iter()
            .filter(|m| m.out && m.media.is_some())
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_photo_is_sent_once_across_crashes_and_its_upload_is_reused() {
        let clock: SharedClock = Arc::new(SystemClock);
        let server = SimServer::start(clock, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let sim = server.sim.clone();
        let me = sim.account("Wren");
        let robin = sim.account("Robin");
        let dir = tempfile::tempdir().unwrap();
        let agents = agents_with_album(dir.path(), "Wren").unwrap();
        let item = load(&agents, "Wren").album.get("beach1").cloned().unwrap();
        let state_dir = dir.path().join("state");
        let state = StateDir::new(&state_dir);
        let path = mtproto::session::session_path(&state, "Wren", Servers::Sim);
        personad::adapters::store::ensure_private_dir(path.parent().unwrap()).unwrap();
        personad::adapters::mtproto::sim::prepare_session(&path, "Wren", server.addr)
            .await
            .unwrap();
        let uploads = mtproto::uploads_path(&state, "Wren", Servers::Sim);

        // Run 1: Robin writes; the photo is uploaded, then the run dies before the send
        // reaches Telegram (here: the send is refused, and the run is killed).
        let run = Run::start(&state, &sim, me).await;
        sim.dm(robin, me, "show me the beach").unwrap();
        until("Robin's message", || {
            run.lines
                .0
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.contains("beach"))
        })
        .await;
        sim.flood(
            me,
            grammers_client::tl::functions::messages::SendMedia::CONSTRUCTOR_ID,
            600,
            1,
        );
        let err = run
            .telegram
            .send_media(outgoing(&item, ChatId(robin), 777))
            .await
            .unwrap_err();
        assert!(matches!(err, TelegramError::FloodWait { .. }), "{err:?}");
        assert_eq!(parts(&sim, me), 2, "uploaded in two parts");
        assert!(media_messages(&sim, me, robin).is_empty());
        run.kill().await;

        // Run 2 retries the task (the same key): one photo in the chat.
        let run = Run::start(&state, &sim, me).await;
        let sent = run
            .telegram
            .send_media(outgoing(&item, ChatId(robin), 777))
            .await
            .unwrap();
        assert_eq!(sent.media.as_ref().map(|m| m.kind), Some(MediaKind::Photo));
        let photos = media_messages(&sim, me, robin);
        assert_eq!(photos.len(), 1);
        assert_eq!(i64::from(photos[0].id), sent.id.0);
        let media = photos[0].media.clone().unwrap();
        assert!(media.photo, "sent as a photo");
        assert_eq!(sim.file_bytes(media.id), Some(photo_bytes(7)));
        assert_eq!(
            parts(&sim, me),
            4,
            "uploaded again: the first upload was never sent"
        );
        let theirs = sim.transcript(robin, Peer::User(me));
        assert!(
            theirs
                .last()
                .unwrap()
                .media
                .as_ref()
                .is_some_and(|m| m.photo)
        );

        // The same photo again (another task): by reference, no new parts.
        let again = run
            .telegram
            .send_media(outgoing(&item, ChatId(robin), 778))
            .await
            .unwrap();
        assert_ne!(again.id, sent.id);
        assert_eq!(parts(&sim, me), 4, "the upload is reused");
        assert_eq!(media_messages(&sim, me, robin).len(), 2);
        assert!(
            sim.events(me)
                .iter()
                .any(|e| e.ends_with("photo by reference")),
            "{:?}",
            sim.events(me)
        );
        let snapshot = std::fs::read(&uploads).unwrap();
        let ledger = std::fs::read(state_dir.join("Wren/telegram-sent.json")).ok();

        // A send whose answer is lost in a kill: Telegram has it, our files do not.
        let lost = run
            .telegram
            .send_media(outgoing(&item, ChatId(robin), 779))
            .await
            .unwrap();
        run.kill().await;
        std::fs::write(&uploads, &snapshot).unwrap();
        match &ledger {
            Some(l) => std::fs::write(state_dir.join("Wren/telegram-sent.json"), l).unwrap(),
            None => {
                let _ = std::fs::remove_file(state_dir.join("Wren/telegram-sent.json"));
            }
        }
        let run = Run::start(&state, &sim, me).await;
        let retried = run
            .telegram
            .send_media(outgoing(&item, ChatId(robin), 779))
            .await
            .unwrap();
        assert_eq!(retried.id, lost.id, "resolved to the message already sent");
        assert_eq!(media_messages(&sim, me, robin).len(), 3);
        assert_eq!(parts(&sim, me), 4, "still by reference after a restart");

        // References expire: the stored one is refused, the photo is uploaded again, sent once.
        sim.expire_file_references();
        run.telegram
            .send_media(outgoing(&item, ChatId(robin), 780))
            .await
            .unwrap();
        assert_eq!(
            parts(&sim, me),
            6,
            "uploaded again after FILE_REFERENCE_EXPIRED"
        );
        assert_eq!(media_messages(&sim, me, robin).len(), 4);
        run.telegram
            .send_media(outgoing(&item, ChatId(robin), 781))
            .await
            .unwrap();
        assert_eq!(parts(&sim, me), 6, "the fresh reference is kept");
        assert_eq!(run.telegram.uploads().len(), 1);
        assert!(
            !run.lines
                .0
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.starts_with("owner")),
            "our photos are not the owner writing"
        );
        run.kill().await;
    }
}
