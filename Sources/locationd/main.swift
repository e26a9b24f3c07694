print("locationd")
