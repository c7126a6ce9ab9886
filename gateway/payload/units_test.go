package payload

// testUnits is the Units of a test: a map, for one goroutine.
type testUnits map[[2]string]string

func (u testUnits) Unit(device, metric string) string { return u[[2]string{device, metric}] }

func (u testUnits) Learn(device, metric, unit string) { u[[2]string{device, metric}] = unit }
