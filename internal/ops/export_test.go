package ops

// OnRecordRead makes Inspect call f after it read a delivery's record and
// before it looks for the work item.
func OnRecordRead(t *Tool, f func()) { t.recordRead = f }
