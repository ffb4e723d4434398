"""Cross-cutting pieces of the console: roles, health, navigation, the demo launcher."""
