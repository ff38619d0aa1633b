"""Every read a view needs: records (excerpt, timeline, search), queues and review pages."""
