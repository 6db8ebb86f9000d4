package delaystream

// DebugIntake describes g's consumer's intake in this process, for a
// test's failure report.
func DebugIntake(g *Group) string { return g.c.DebugIntake() }
