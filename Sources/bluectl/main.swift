print("bluectl")
