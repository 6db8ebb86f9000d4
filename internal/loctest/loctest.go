package loctest

import "github.com/delaystream/delaystream"

// InGroups returns loc's places in consumer groups (not quarantine
// entries).
func InGroups(loc delaystream.Location) []delaystream.Place {
	var out []delaystream.Place
	for _, p := range loc.Places {
		if p.Group != "" && p.Kind != delaystream.PlaceQuarantined {
			out = append(out, p)
		}
	}
	return out
}

// Of returns loc's places of kind k.
func Of(loc delaystream.Location, k delaystream.PlaceKind) []delaystream.Place {
	var out []delaystream.Place
	for _, p := range loc.Places {
		if p.Kind == k {
			out = append(out, p)
		}
	}
	return out
}

// Waiting returns loc's waiting place, nil when it is not waiting.
func Waiting(loc delaystream.Location) *delaystream.Place {
	if ps := Of(loc, delaystream.PlaceWaiting); len(ps) > 0 {
		return &ps[0]
	}
	return nil
}
