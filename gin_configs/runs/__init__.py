"""gin files, found through gin search paths and as package resources (gin's system path reader)."""
