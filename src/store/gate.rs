//! The admission gate's order: every change enters the log in the order the host made it
//! (docs/design.md "Admission gate").
//!
//! A change takes a ticket when the host makes it, which can be well before its content is
//! known: an `Engine.submit` takes its ticket the moment it resolves, but the hooks the Engine
//! does not await finish later, and only then is its group known. Tickets are kept in one
//! queue; a holder may act (send its group to the committer, apply a prohibition) only at the
//! head of the queue, so a change made after a submit resolved cannot land before that
//! submit's group, whatever finishes first. A ticket leaves the queue when its holder is done
//! or cancels it (a submit that failed, a group with nothing for this store).
//!
//! One exception to "in the order of the tickets": a submit that removes an output another,
//! still running, submit admits must land after that admission (the Engine made them in that
//! order). [`Gate::order_before`] moves (or reserves) the admitter's ticket just before the
//! remover's.
//!
//! Waiting happens on the caller's thread (the tokio blocking pool, the expiry thread), never
//! on the JS thread: the ticket ahead may belong to JS work that has yet to run.
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};

use super::StoreError;

/// A place in the gate's order; its number is unique for the life of the store handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ticket(pub u64);

struct Place {
    ticket: Ticket,
    /// The clock (Unix seconds) when the ticket was taken: expiries due by then are numbered
    /// before the group that holds it (BRC-193 §8), later ones after.
    at: Option<u64>,
}

#[derive(Default)]
struct Queue {
    places: VecDeque<Place>,
    next: u64,
    closed: bool,
}

#[derive(Default)]
pub(crate) struct Gate {
    queue: Mutex<Queue>,
    /// Signalled whenever the head may have changed: blocking waiters use the condition,
    /// async ones (the napi entrances, which must not hold a blocking thread while a ticket
    /// ahead of them waits for JS) the notify.
    moved: Condvar,
    notify: tokio::sync::Notify,
}

/// The head of the gate's order, held; dropping it lets the next ticket through.
pub struct Turn<'a> {
    gate: &'a Gate,
    ticket: Ticket,
    at: Option<u64>,
}

impl Turn<'_> {
    /// The clock when this turn's ticket was taken (see [`Place::at`]).
    pub fn at(&self) -> Option<u64> {
        self.at
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.gate.leave(self.ticket);
    }
}

impl Gate {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new ticket at the end of the order.
    pub fn reserve(&self, at: Option<u64>) -> Ticket {
        let mut q = self.lock();
        q.next += 1;
        let ticket = Ticket(q.next);
        q.places.push_back(Place { ticket, at });
        ticket
    }

    /// Makes `first` come right before `then`: an existing ticket still queued after `then`
    /// moves there; `None` reserves a new one there. Returns `first`'s ticket. A `first` no
    /// longer queued (it went through, or was given up) is returned as it is. When `then` is
    /// no longer queued, nothing can be put before it: `first` stays where it is, or a new
    /// ticket goes at the end.
    pub fn order_before(&self, first: Option<Ticket>, then: Ticket, at: Option<u64>) -> Ticket {
        let mut q = self.lock();
        let position = |q: &Queue, t: Ticket| q.places.iter().position(|p| p.ticket == t);
        let existing = match first {
            Some(t) => match position(&q, t) {
                Some(i) => Some(i),
                None => return t,
            },
            None => None,
        };
        let Some(target) = position(&q, then) else {
            drop(q);
            return first.unwrap_or_else(|| self.reserve(at));
        };
        let place = match existing {
            Some(i) if i < target => return q.places[i].ticket,
            Some(i) => q.places.remove(i).expect("found above"),
            None => {
                q.next += 1;
                Place { ticket: Ticket(q.next), at }
            }
        };
        let ticket = place.ticket;
        q.places.insert(target, place);
        // The head may have changed.
        self.wake();
        ticket
    }

    /// Waits until `ticket` is at the head of the order. `Closed` when the store closes first
    /// (the ticket is given up then). A ticket not queued (cancelled, or never reserved here)
    /// is `Invalid`.
    pub fn turn(&self, ticket: Ticket) -> Result<Turn<'_>, StoreError> {
        let mut q = self.lock();
        loop {
            if q.closed {
                drop(q);
                self.leave(ticket);
                return Err(StoreError::Closed);
            }
            match q.places.iter().position(|p| p.ticket == ticket) {
                None => return Err(StoreError::Invalid(format!("admission ticket {} is not waiting", ticket.0))),
                Some(0) => {
                    let at = q.places[0].at;
                    return Ok(Turn { gate: self, ticket, at });
                }
                Some(_) => q = self.moved.wait(q).unwrap_or_else(|p| p.into_inner()),
            }
        }
    }

    /// Gives up a ticket wherever it is in the order (a no-op when it is not queued).
    pub fn leave(&self, ticket: Ticket) {
        let mut q = self.lock();
        if let Some(i) = q.places.iter().position(|p| p.ticket == ticket) {
            q.places.remove(i);
            self.wake();
        }
    }

    fn wake(&self) {
        self.moved.notify_all();
        self.notify.notify_waiters();
    }

    /// Resolves once `ticket` is at the head of the order (without taking the turn: the
    /// caller then takes it with [`Gate::turn`] on a blocking thread, at once unless another
    /// ticket was ordered before it meanwhile). Errors as [`Gate::turn`].
    pub async fn until_head(&self, ticket: Ticket) -> Result<(), StoreError> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let q = self.lock();
                if q.closed {
                    return Err(StoreError::Closed);
                }
                match q.places.iter().position(|p| p.ticket == ticket) {
                    None => return Err(StoreError::Invalid(format!("admission ticket {} is not waiting", ticket.0))),
                    Some(0) => return Ok(()),
                    Some(_) => {}
                }
            }
            notified.await;
        }
    }

    /// Every waiter returns `Closed`; later turns too.
    pub fn close(&self) {
        self.lock().closed = true;
        self.wake();
    }

    /// Tickets waiting (for `stats()`).
    pub fn waiting(&self) -> usize {
        self.lock().places.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn turns_follow_reservation_order_whatever_order_the_holders_arrive_in() {
        let gate = Arc::new(Gate::default());
        let tickets: Vec<Ticket> = (0..8).map(|_| gate.reserve(None)).collect();
        let order = Arc::new(Mutex::new(Vec::new()));
        let handles: Vec<_> = tickets
            .iter()
            .rev()
            .map(|&t| {
                let (gate, order) = (gate.clone(), order.clone());
                std::thread::spawn(move || {
                    let turn = gate.turn(t).unwrap();
                    order.lock().unwrap().push(t);
                    drop(turn);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), tickets);
        assert_eq!(gate.waiting(), 0);
    }

    #[test]
    fn a_cancelled_ticket_lets_the_next_through_and_order_before_moves_an_admitter_ahead() {
        let gate = Gate::default();
        let (a, b, c) = (gate.reserve(None), gate.reserve(None), gate.reserve(None));
        gate.leave(a);
        // c admits what b removes: c goes before b.
        assert_eq!(gate.order_before(Some(c), b, None), c);
        drop(gate.turn(c).unwrap());
        drop(gate.turn(b).unwrap());
        // A ticket reserved before a queued one, for an admitter that had none: d, f, e.
        let (d, e) = (gate.reserve(None), gate.reserve(None));
        let f = gate.order_before(None, e, None);
        assert!(f != d && f != e);
        drop(gate.turn(d).unwrap());
        drop(gate.turn(f).unwrap());
        drop(gate.turn(e).unwrap());
        // An admitter already ahead stays where it is; once the remover went through, a new
        // ticket goes at the end.
        let (g, h) = (gate.reserve(None), gate.reserve(None));
        assert_eq!(gate.order_before(Some(g), h, None), g);
        drop(gate.turn(g).unwrap());
        drop(gate.turn(h).unwrap());
        let late = gate.order_before(None, h, None);
        drop(gate.turn(late).unwrap());
        assert_eq!(gate.waiting(), 0);
    }

    #[test]
    fn close_wakes_waiters_with_closed() {
        let gate = Arc::new(Gate::default());
        let (_a, b) = (gate.reserve(None), gate.reserve(None));
        let g = gate.clone();
        let waiter = std::thread::spawn(move || g.turn(b).map(|_| ()));
        std::thread::sleep(std::time::Duration::from_millis(20));
        gate.close();
        assert!(matches!(waiter.join().unwrap(), Err(StoreError::Closed)));
    }
}
