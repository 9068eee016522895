"""The Lessons page's parts: the steps as data, presenter mode and the class poll with its store."""
