package publisher

import "github.com/presenced/presenced/presence"

// Privy is where the true presence of users with a privacy setting goes
// (delivery.Privacy): what is retained and delivered to everyone is only
// ever the public view (presence.Aggregate.Public), so nothing private
// leaves the node by default; the Privy hands the truth to the user's own
// connections and to service accounts, per delivery, retained included.
type Privy interface {
	// Keep records user's latest true payload beside its latest public
	// one, before either is delivered.
	Keep(user string, public, truth []byte)
	// Forget forgets user's (no privacy setting any more, or the user is
	// no longer shown here).
	Forget(user string)
	// Send delivers a true change that left the public view as it was to
	// the subscriptions of topic entitled to it only (nothing when it
	// cannot tell them apart: a server without delivery.Guard).
	Send(user string, version uint64, topic string, payload []byte) error
}

// privateView is what a publish shows everyone else.
type privateView struct {
	public  []byte
	agg     presence.Aggregate // the public view
	truth   []byte             // the true payload
	private bool               // a has a privacy setting
	changed bool               // the public view is published (else only the entitled are sent the truth)
	forget  bool               // the user had a privacy setting, and has none now
}

// privateView works out a's public view against what old showed (had: a
// view exists), truth being a's payload. Called with mu held.
//
// The rule (docs/presence.md, "Privacy: invisible and last_seen"): a user
// without a privacy setting is shown as they are, every change published.
// With one, the public view is published only when it differs from the
// one published before: a change that only the user and service accounts
// can see (an invisible user going online, busy, offline) moves no public
// version and sends no message to anyone else, so neither the payload nor
// its timing says that the user did something.
func (p *Publisher) privateView(a presence.Aggregate, old view, had bool, truth []byte) privateView {
	if a.Privacy.IsZero() {
		agg := a
		agg.Privacy = presence.Privacy{}
		return privateView{public: truth, agg: agg, truth: truth, changed: true, forget: old.pubView() != nil}
	}
	pub := a.Public()
	if had {
		oldPub := old.pubView()
		if oldPub == nil {
			// The user had no setting: its view is the truth, its
			// payload the public one (rare: made again).
			oldPub = &publicView{payload: old.payload(a.User), agg: old.aggregate(a.User, nil)}
		}
		if oldPub != nil && presence.SamePublic(oldPub.agg, pub) {
			return privateView{public: oldPub.payload, agg: oldPub.agg, truth: truth, private: true}
		}
	}
	return privateView{public: pub.AppendJSON(nil), agg: pub, truth: truth, private: true, changed: true}
}

// show publishes a's views: the public one to everyone, when it changed
// (the truth kept first, for the entitled), running commit (which stores
// the view, the retained presence) with the publish; else the truth to the
// entitled only, commit run first (the public view it stores is the one
// before). A user whose setting went back to nothing is forgotten by
// the Privy once its true (now public) view is out. Without a Privy, a
// change of the truth alone is shown to nobody.
func (p *Publisher) show(a presence.Aggregate, pv privateView, commit func()) error {
	topic := p.Topic(a.User)
	if pv.private && p.privy != nil {
		p.privy.Keep(a.User, pv.public, pv.truth)
	}
	if !pv.changed {
		p.Stats.Private.Add(1)
		commit()
		if p.privy == nil {
			return nil
		}
		return p.privy.Send(a.User, a.Version, topic, pv.truth)
	}
	err := p.broker.Publish(a.User, a.Version, topic, pv.public, commit)
	if pv.forget && p.privy != nil {
		p.privy.Forget(a.User)
	}
	return err
}

// unkeep forgets what the Privy keeps of user, shown as v, when anything.
// Called with mu held (lock order: the publisher's, then the Privy's).
func (p *Publisher) unkeep(user string, v view) {
	if v.pubView() != nil && p.privy != nil {
		p.privy.Forget(user)
	}
}
