"""One module per controller: ARS, AutoscalingListener, EphemeralRunnerSet, EphemeralRunner."""
