"""Drop-in replacements for other toolkits' functions, with mona's exact results."""
