package wire

import "testing"

func TestSlot(t *testing.T) {
	t.Parallel()
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	tests := []struct {
		key  string
		slot int
	}{
		{"123456789", 0x31C3},
		{"foo", 12182},
		{"bar", 5061},
		{"{user1000}.following", Slot("user1000")},
		{"foo{{bar}}zap", Slot("{bar")},
		{"foo{bar}{zap}", Slot("bar")},
		{"{", Slot("{")},
		{"", 0},
	}
	for _, tt := range tests {
		if got := Slot(tt.key); got != tt.slot {
			t.Errorf("Slot(%q) = %d, want %d", tt.key, got, tt.slot)
		}
	}
	if Slot("foo{}{bar}") == Slot("bar") {
		t.Errorf("an empty first tag must hash the whole key")
	}
}
