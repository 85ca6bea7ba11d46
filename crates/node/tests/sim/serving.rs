//! A node that does not serve its NSDs yet (it has not learned of a new file
//! system or disk) answers `NotServing`: writers resend for a grace period
//! instead of reporting the disk, which would take it down and resync it for
//! nothing. With the report instead of the wait, the disk goes down here.

use super::*;

async fn write_while_not_serving(world: &Arc<World>, for_secs: u64) -> Result<(), String> {
    start_forwarders(world);
    let until = tokio::time::Instant::now() + Duration::from_secs(for_secs);
    lock(&world.not_serving).insert(SERVERS[1].to_string(), until);
    let client = client_of(world, "c:1")?;
    let ino = create_open(&client, "f").await?;
    let data: Vec<u8> = (0..FILE_BLOCKS * u64::from(BLOCK))
        .map(|i| (i % 251) as u8)
        .collect();
    client
        .write(ino, 0, Bytes::from(data.clone()))
        .await
        .map_err(|e| format!("write: {e}"))?;
    client
        .fsync(ino, false)
        .await
        .map_err(|e| format!("fsync: {e}"))?;
    if tokio::time::Instant::now() < until {
        return Err("the fsync returned while nsd2 was not served: it skipped a copy".into());
    }
    let states: Vec<(String, &str)> = world
        .config()
        .nsds
        .iter()
        .map(|n| (n.name.clone(), n.status.as_str()))
        .collect();
    if states.iter().any(|(_, s)| *s != "up") {
        return Err(format!(
            "a disk not served yet was taken down: {states:?}\n{}",
            lock(&world.trace).join("\n")
        ));
    }
    let fresh = client_of(world, "c:2")?;
    let got = fresh
        .read(ino, 0, data.len() as u32)
        .await
        .map_err(|e| format!("read: {e}"))?;
    if got.as_ref() != data.as_slice() {
        return Err("the file does not read back as written".into());
    }
    replicas_converge::check(world, ino)
}

#[test]
fn a_disk_not_served_yet_is_waited_for_not_taken_down() {
    let (_dir, world, rt) = super::setup::lossless(7);
    let run = async {
        super::shard::start_shard(&world, 7).await;
        write_while_not_serving(&world, 3).await
    };
    if let Err(e) = rt.block_on(run) {
        panic!("{e}");
    }
}
