//! A rebalance in the map and its commands, encoded (docs/format/cluster-map.md, "A rebalance
//! in the map"; version 6).

use std::collections::BTreeSet;

use super::{bad, read_vbucket, write_vbucket, DecodeError, Reader, Writer};
use crate::map::NodeId;
use crate::moves::{MoveEntry, MoveState, PlannedMove, Rebalance, MOVES_MAX};

pub(super) fn write_nodes(w: &mut Writer, nodes: &BTreeSet<NodeId>) {
    w.count(nodes.len());
    nodes.iter().for_each(|node| w.u64(*node));
}

pub(super) fn read_nodes(r: &mut Reader) -> Result<BTreeSet<NodeId>, DecodeError> {
    let count = r.count()?;
    (0..count).map(|_| r.u64()).collect()
}

pub(super) fn state_byte(state: MoveState) -> u8 {
    match state {
        MoveState::Planned => 0,
        MoveState::Copying => 1,
        MoveState::Ready => 2,
        MoveState::Done => 3,
        MoveState::Aborted => 4,
    }
}

pub(super) fn state_from(byte: u8) -> Result<MoveState, DecodeError> {
    Ok(match byte {
        0 => MoveState::Planned,
        1 => MoveState::Copying,
        2 => MoveState::Ready,
        3 => MoveState::Done,
        4 => MoveState::Aborted,
        _ => return Err(bad("move state")),
    })
}

/// `0` (none) or `1 | rebalance`.
pub(super) fn write_rebalance(w: &mut Writer, rebalance: Option<&Rebalance>) {
    let Some(rebalance) = rebalance else {
        w.u8(0);
        return;
    };
    w.u8(1);
    w.u64(rebalance.id);
    w.u8(u8::from(rebalance.stopping));
    write_nodes(w, &rebalance.nodes);
    write_nodes(w, &rebalance.ejected);
    w.count(rebalance.moves.len());
    for step in &rebalance.moves {
        w.u64(step.id);
        w.str(&step.bucket);
        w.u16(step.vbucket);
        w.u64(step.expected_epoch);
        write_vbucket(w, &step.after);
        w.node(step.source);
        w.count(step.copies.len());
        step.copies.iter().for_each(|node| w.u64(*node));
        w.u32(step.attempt);
        w.u8(state_byte(step.state));
    }
}

pub(super) fn read_rebalance(r: &mut Reader) -> Result<Option<Rebalance>, DecodeError> {
    if !r.bool()? {
        return Ok(None);
    }
    let id = r.u64()?;
    let stopping = r.bool()?;
    let nodes = read_nodes(r)?;
    let ejected = read_nodes(r)?;
    let count = r.count()?;
    if count > MOVES_MAX {
        return Err(bad("move count"));
    }
    let mut moves = Vec::with_capacity(count.min(4096));
    for _ in 0..count {
        moves.push(MoveEntry {
            id: r.u64()?,
            bucket: r.str()?,
            vbucket: r.u16()?,
            expected_epoch: r.u64()?,
            after: read_vbucket(r)?,
            source: r.node()?,
            copies: {
                let count = r.count()?;
                (0..count).map(|_| r.u64()).collect::<Result<_, _>>()?
            },
            attempt: r.u32()?,
            state: state_from(r.u8()?)?,
        });
    }
    Ok(Some(Rebalance {
        id,
        stopping,
        nodes,
        ejected,
        moves,
    }))
}

pub(super) fn write_planned(w: &mut Writer, moves: &[PlannedMove]) {
    w.count(moves.len());
    for step in moves {
        w.str(&step.bucket);
        w.u16(step.vbucket);
        w.u64(step.expected_epoch);
        write_vbucket(w, &step.after);
    }
}

pub(super) fn read_planned(r: &mut Reader) -> Result<Vec<PlannedMove>, DecodeError> {
    let count = r.count()?;
    if count > MOVES_MAX {
        return Err(bad("move count"));
    }
    let mut moves = Vec::with_capacity(count.min(4096));
    for _ in 0..count {
        moves.push(PlannedMove {
            bucket: r.str()?,
            vbucket: r.u16()?,
            expected_epoch: r.u64()?,
            after: read_vbucket(r)?,
        });
    }
    Ok(moves)
}
