"""The files users write: a budget file and a vendor map, read and checked key by key."""
